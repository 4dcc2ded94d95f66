"""rl's `code_sandbox` scorer against ROLL's local code tests, case by case from reading
roll/pipeline/rlvr/rewards/code_sandbox_reward_worker.py (`cal_local_test`,
`run_assert_tests`, `run_check_based_tests`, `run_text_tests`, `run_io_tests`) and
roll/utils/local_code/{extract_utils,testing_util}.py (ROLL 8eb27cc2): the program found as
`extract_code_generation` finds it, each case type run as ROLL runs it, 1 only when every
case passes. Every case runs for real in rl's sandbox (ROLL cannot be imported here).
"""

from __future__ import annotations

import json
import time

import pytest

from rl.core.rewards.code_sandbox import check_row, code_sandbox, program_of

ADD = "```python\ndef add(a, b):\n    return a + b\n```"
WRONG_ADD = "```python\ndef add(a, b):\n    return a - b\n```"


def row(case_type: str, cases: list, function: str = "") -> dict:
    return {
        "id": "1",
        "case_type": case_type,
        "test_cases": json.dumps(cases),  # a JSON string, as ROLL's files hold it
        "test_case_function": function,
    }


def score(response: str, extra: dict, **options: object) -> dict[str, float]:
    return code_sandbox(response, "", extra, **{"timeout_s": 5.0, **options})  # type: ignore[arg-type]


ASSERTS = row(
    "assert", [{"assert_code": "assert add(1, 2) == 3"}, {"assert_code": "assert add(0, 0) == 0"}]
)


def test_the_program_is_found_as_roll_finds_it():
    thinking = "<think>maybe ```python\nx = 1\n```</think>\n"
    # after </think>; the first block that defines a function, not the first block
    response = thinking + "```python\nprint(2)\n```\n```python\ndef f():\n    return 1\n```"
    assert program_of(response) == "def f():\n    return 1\n"
    assert program_of("```\nprint(3)\n```") == "print(3)\n"
    assert program_of("  def g(): pass  ") == "def g(): pass"  # no fence: the whole text


def test_assert_cases_score_one_only_when_all_pass():
    assert score(ADD, ASSERTS) == {"score": 1.0, "acc": 1.0, "pass_ratio": 1.0}
    assert score(WRONG_ADD, ASSERTS)["score"] == 0.0  # add(0, 0) passes, add(1, 2) not
    assert score("", ASSERTS)["score"] == 0.0  # an empty response
    assert score("```python\ndef add(a, b) return\n```", ASSERTS)["score"] == 0.0  # syntax


def test_roll_base_imports_are_there():
    program = "```python\ndef add(a, b):\n    return sqrt(a * a) + len(deque([b]))\n```"
    extra = row("assert", [{"assert_code": "assert add(3, 9) == 4"}])
    assert score(program, extra)["score"] == 1.0  # math.sqrt and collections.deque, unimported


def test_pytest_style_functions_are_called():
    extra = row("pytest", [{"assert_code": "def test_a():\n    assert add(2, 2) == 4\n"}])
    assert score(ADD, extra)["score"] == 1.0
    failing = row("pytest", [{"assert_code": "def test_a():\n    assert add(2, 2) == 5\n"}])
    assert score(ADD, failing)["score"] == 0.0  # the function is called, not only defined


def test_a_program_reading_stdin_cannot_eat_the_test():
    program = (
        "```python\nimport sys\nDATA = sys.stdin.read()\ndef add(a, b):\n    return a + b\n```"
    )
    assert score(program, ASSERTS)["score"] == 1.0


def test_check_based_reports_the_pass_ratio():
    # ROLL's layout: line 0 comes first in every test, each further line is one test
    lines = [
        "import math",
        "def check(candidate): assert candidate(1) == 2",
        "def check(candidate): assert candidate(2) == 3",
        "def check(candidate): assert candidate(3) == 5",
    ]
    extra = row("check_based", [{"assert_code": "\n".join(lines), "entry_point": "inc"}])
    result = score("```python\ndef inc(x):\n    return x + 1\n```", extra)
    assert result["score"] == 0.0 and result["pass_ratio"] == pytest.approx(2 / 3)


def test_text_cases_test_the_response_itself():
    extra = row("text", [{"assert_code": "assert 'hello' in {response}.lower()"}])
    assert score("Hello there", extra)["score"] == 1.0
    assert score("Goodbye", extra)["score"] == 0.0


def test_stdin_cases_compare_lines_tokens_and_floats():
    program = "```python\na, b = map(float, input().split())\nprint(a / b)\n```"
    cases = [
        {"stdin": "1 4\n", "expected_stdout": "0.25\n"},
        {"stdin": "1 3\n", "expected_stdout": "0.333333333"},  # close as a float
    ]
    assert score(program, row("stdin", cases))["score"] == 1.0
    wrong = [{"stdin": "1 4\n", "expected_stdout": "0.5"}]
    assert score(program, row("stdin", wrong))["score"] == 0.0
    spaced = "```python\nprint(' 1   2 ')\nprint()\n```"
    assert score(spaced, row("stdin", [{"stdin": "", "expected_stdout": "1 2"}]))["score"] == 1.0


def test_call_based_cases_call_the_function_or_solution_method():
    cases = [
        {"stdin": "[1, 2]\n3", "expected_stdout": "[4, 5]"},
        {"stdin": "[]\n0", "expected_stdout": "[]"},
    ]
    function = "```python\ndef shift(xs, k):\n    return tuple(x + k for x in xs)\n```"
    assert score(function, row("stdin", cases, "shift"))["score"] == 1.0
    method = (
        "```python\nclass Solution:\n    def shift(self, xs, k):\n"
        "        return [x + k for x in xs]\n```"
    )
    assert score(method, row("stdin", cases, "shift"))["score"] == 1.0
    wrong = "```python\ndef shift(xs, k):\n    return xs\n```"
    assert score(wrong, row("stdin", cases, "shift"))["score"] == 0.0


def test_a_hang_or_a_memory_hog_is_a_failed_case_not_a_stuck_run():
    hang = "```python\ndef add(a, b):\n    while True:\n        pass\n```"
    started = time.monotonic()
    assert score(hang, ASSERTS, timeout_s=1.0)["score"] == 0.0
    assert time.monotonic() - started < 15
    hog = "```python\nX = bytearray(4 << 30)\ndef add(a, b):\n    return a + b\n```"
    assert score(hog, ASSERTS, memory_mb=256)["score"] == 0.0


def test_a_row_without_test_cases_is_refused_by_check_row():
    check_row("", ASSERTS)
    with pytest.raises(ValueError, match="case_type and test_cases"):
        check_row("", {"id": "1", "tag": "KodCode"})
    with pytest.raises(ValueError, match="non-empty list"):
        check_row("", row("assert", []))
