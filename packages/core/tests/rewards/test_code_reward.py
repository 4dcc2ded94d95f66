"""The code-execution reward: the model's program against test cases in the sandbox
(standard input/output and call-based, verl's ground-truth form), with the sandbox's
limits turning hangs, crashes and escapes into a failed case, never an exception."""

from __future__ import annotations

import json

import pytest

from rl.core.agent.sandbox import SandboxLimits
from rl.core.rewards.code import code, program_of
from rl.core.rewards.registry import default_compute_score

SUM = {"inputs": ["1 2\n", "10 -3\n"], "outputs": ["3\n", "7"]}
FAST = SandboxLimits(timeout_s=2.0, cpu_s=2)


def answer(program):
    return f"Here is my solution.\n```python\n{program}\n```\nIt reads two numbers."


@pytest.mark.parametrize("data_source", ["apps", "codecontests", "codeforces", "taco", "code"])
def test_a_correct_stdin_program_passes_every_case(data_source):
    program = "a, b = map(int, input().split())\nprint(a + b)"
    assert default_compute_score(data_source, answer(program), json.dumps(SUM)) == 1.0


@pytest.mark.parametrize(
    "program",
    [
        "a, b = map(int, input().split())\nprint(a - b)",  # wrong on both
        "print(3)",  # right on the first case only
        "import sys\nsys.exit(1)",
        "while True:\n    pass",  # killed at the limit
        "import socket\nsocket.create_connection(('example.com', 80))\nprint(3)",
        "open('/tmp/rl-code-reward-escape', 'w').write('x')\nprint(3)",
    ],
)
def test_wrong_hanging_crashing_or_escaping_programs_score_zero(program):
    assert code(answer(program), SUM, FAST) == 0.0


def test_call_based_cases_compare_return_values():
    tests = {"fn_name": "add", "inputs": [[1, 2], [[1], [2, 3]]], "outputs": [[3], [1, 2, 3]]}
    assert code("def add(a, b):\n    return a + b", tests, FAST) == 1.0
    assert code("def add(a, b):\n    return a - b if isinstance(a, int) else a", tests, FAST) == 0.0


def test_the_last_python_block_is_the_program():
    text = "```python\nprint(1)\n```\nbetter:\n```python\nprint(2)\n```"
    assert program_of(text) == "print(2)\n"
    assert program_of("print(5)") == "print(5)"


@pytest.mark.parametrize(
    "truth", ["not json", {"inputs": ["1"]}, {"inputs": ["1", "2"], "outputs": ["1"]}]
)
def test_a_malformed_ground_truth_is_a_clear_error(truth):
    with pytest.raises(ValueError, match="code task"):
        code("print(1)", truth, FAST)
