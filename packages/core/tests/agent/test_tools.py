"""Built-in tools and the Hermes tool-call parser."""

from __future__ import annotations

import pytest

from rl.core.agent.parser import HermesParser, ToolCall
from rl.core.agent.tools import Calculator, PythonRunner, ToolError, evaluate, schema


@pytest.mark.parametrize(
    ("expression", "value"),
    [("3*4+5", 17), ("(2+3)*(4-1)", 15), ("7/2", 3.5), ("-2**3", -8), ("17 // 5 % 3", 0)],
)
def test_the_calculator_evaluates_arithmetic_as_python_does(expression, value):
    assert evaluate(expression) == eval(expression)  # the reference: Python itself
    assert Calculator().call({"expression": expression}) == str(value)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os')", "not allowed"),
        ("1/0", "division by zero"),
        ("9**9**9", "exponent"),
        ("((((9**64)**64)**64)**64)**64", "bits"),
        ("1 +", "not an arithmetic expression"),
        ("True + 1", "boolean"),
        ("x" * 300, "longer than"),
    ],
)
def test_the_calculator_refuses_what_is_not_bounded_arithmetic(expression, message):
    with pytest.raises(ToolError, match=message):
        Calculator().call({"expression": expression})


def test_the_python_tool_returns_stdout_or_the_error():
    assert PythonRunner().call({"code": "print(6*7)"}) == "42\n"
    with pytest.raises(ToolError, match="ZeroDivisionError"):
        PythonRunner().call({"code": "1/0"})


def test_tools_describe_themselves_for_the_chat_template():
    entry = schema(Calculator())
    assert entry["type"] == "function" and entry["function"]["name"] == "calculator"
    assert entry["function"]["parameters"]["required"] == ["expression"]


def test_hermes_parser_reads_calls_and_reports_bad_ones():
    parser = HermesParser()
    text = (
        'ok <tool_call>{"name": "calculator", "arguments": {"expression": "1+1"}}</tool_call>'
        '<tool_call>{"name": "python", "arguments": "{\\"code\\": \\"print(1)\\"}"}</tool_call>'
        '<tool_call>not json</tool_call><tool_call>{"arguments": {}}</tool_call>'
    )
    turn = parser.parse(text)
    assert turn.calls == [
        ToolCall("calculator", {"expression": "1+1"}),
        ToolCall("python", {"code": "print(1)"}),
    ]
    assert turn.errors == ["tool call is not JSON (Expecting value)", "tool call needs a 'name'"]
    assert parser.parse("just an answer: 42").calls == []
    unclosed = parser.parse('<tool_call>{"name": "calculator", "arguments": {"expression": "2"}}')
    assert unclosed.calls == [ToolCall("calculator", {"expression": "2"})]
