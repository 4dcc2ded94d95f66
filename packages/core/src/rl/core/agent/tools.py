"""Tools an agent may call: a name, a description and a JSON-schema of its arguments (the
`tools=` entries of `apply_chat_template`, OpenAI function format), and `call(arguments)`
returning the text the model reads next. A tool that fails returns an error text through
`ToolError` (the agent loop counts it); it never raises anything else to the loop.

Built in: `Calculator` (arithmetic on an AST whitelist, bounded sizes) and `PythonRunner`
(the code in `rl.core.agent.sandbox` with its limits).
"""

from __future__ import annotations

import ast
import math
import operator
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from rl.core.agent.sandbox import SandboxLimits, run_python


class ToolError(Exception):
    """What a tool says went wrong; the model reads the message."""


class Tool(Protocol):
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object

    def call(self, arguments: Mapping[str, Any]) -> str: ...


def schema(tool: Tool) -> dict[str, Any]:
    """The tool as `apply_chat_template(tools=[...])` takes it (OpenAI function format)."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}


def evaluate(
    expression: str, max_length: int = 200, max_exponent: int = 64, max_bits: int = 4096
) -> int | float:
    """The value of an arithmetic `expression` (numbers, + - * / // % **, parentheses);
    ToolError for anything else, a division by zero, an exponent above `max_exponent` or
    a power of more than `max_bits` bits (nested powers cannot blow up)."""
    if len(expression) > max_length:
        raise ToolError(f"expression longer than {max_length} characters")
    try:
        with warnings.catch_warnings():  # "1)2" is a SyntaxError, not a warning to print
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise ToolError(f"not an arithmetic expression: {expression!r}") from None

    def value(node: ast.AST) -> int | float:
        if isinstance(node, ast.Expression):
            return value(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            if isinstance(node.value, bool):
                raise ToolError("not a number: a boolean")
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd | ast.USub):
            operand = value(node.operand)
            return -operand if isinstance(node.op, ast.USub) else operand
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = value(node.left), value(node.right)
            if isinstance(node.op, ast.Pow):
                if abs(right) > max_exponent:
                    raise ToolError(f"exponent {right} is above {max_exponent}")
                grows = isinstance(left, int) and abs(left) > 1 and right > 0
                if grows and abs(int(left)).bit_length() * right > max_bits:
                    raise ToolError(f"the result would have more than {max_bits} bits")
            try:
                return _BINARY[type(node.op)](left, right)
            except ZeroDivisionError:
                raise ToolError("division by zero") from None
        raise ToolError(f"not allowed in an arithmetic expression: {ast.dump(node)[:60]}")

    result = value(tree)
    if isinstance(result, float) and not math.isfinite(result):
        raise ToolError("the result is not a finite number")
    return result


def _format(number: int | float) -> str:
    if isinstance(number, float) and number.is_integer() and abs(number) < 1e15:
        return str(int(number))
    return repr(number)


def _string_parameter(key: str, description: str) -> dict[str, Any]:
    """The JSON schema of a tool's arguments when they are one required string, `key`."""
    return {
        "type": "object",
        "properties": {key: {"type": "string", "description": description}},
        "required": [key],
    }


def _string_argument(arguments: Mapping[str, Any], key: str, error: str) -> str:
    """The string argument `key`; ToolError(`error`) when it is missing or not a string."""
    value = arguments.get(key)
    if not isinstance(value, str):
        raise ToolError(error)
    return value


@dataclass
class Calculator:
    name: str = "calculator"
    description: str = "Evaluate an arithmetic expression (+ - * / // % ** and parentheses)."
    parameters: dict[str, Any] = field(
        default_factory=lambda: _string_parameter("expression", "e.g. (3+4)*5")
    )

    def call(self, arguments: Mapping[str, Any]) -> str:
        error = "calculator needs an 'expression' string"
        return _format(evaluate(_string_argument(arguments, "expression", error)))


@dataclass
class PythonRunner:
    """Runs the model's code in the sandbox (`rl.core.agent.sandbox` states its promise);
    the result is its stdout (or the error)."""

    limits: SandboxLimits = field(default_factory=SandboxLimits)
    name: str = "python"
    description: str = "Run Python code and return what it prints (no network, no files)."
    parameters: dict[str, Any] = field(
        default_factory=lambda: _string_parameter("code", "Python source")
    )

    def call(self, arguments: Mapping[str, Any]) -> str:
        code = _string_argument(arguments, "code", "python needs a 'code' string")
        result = run_python(code, self.limits)
        if not result.ok:
            raise ToolError(result.error())
        return result.stdout
