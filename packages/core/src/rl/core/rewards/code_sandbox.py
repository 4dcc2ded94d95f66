"""ROLL's code sandbox reward (its `CodeSandboxRewardWorker` with `use_local: true`, the
local tests ROLL adapts from LiveCodeBench), run in rl's sandbox (`rl.core.agent.sandbox`:
its docstring states the limits and the boundary) instead of a bare `exec`.

A row in ROLL's KodCode layout carries, beside its prompt, `case_type`, `test_cases` (a
list or its JSON text) and `test_case_function`; rl hands them over in `extra_info`. The
response's program is taken as ROLL takes it (after `</think>` / `<|begin_of_solution|>`;
the first fenced block that defines a function, else the first block, else the whole
text) and tested by case type:

- `assert` / `pytest`: each case's `assert_code` runs after the program (pytest-style
  `def test_*` functions are called);
- `check_based`: the first line of the one case's `assert_code` defines `check`, each
  further line is a test run with `check(<entry_point>)` (`import_prefix` before the
  program); the pass ratio is reported;
- `text`: each case's `assert_code` with `{response}` replaced by the response as a string
  (no program is extracted);
- any other (`stdin` cases): `{"stdin", "expected_stdout"}` pairs; the program reads stdin
  and its output is compared line by line (stripped), then token by token, then as floats
  (close); with `test_case_function` the function (or `Solution().<name>`) is called with
  each stdin line parsed as JSON and its value compared with the expected JSON.

The score is 1.0 when every case passes, else 0.0, as ROLL's `correct`; a case that
crashes, times out or breaks a limit fails, and a response with no program scores 0.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from rl.core.agent.sandbox import SandboxLimits, SandboxResult, run_cases

# the names ROLL's local tests import before the program (its BASE_IMPORTS)
_STAR = [
    "string",
    "re",
    "datetime",
    "collections",
    "heapq",
    "bisect",
    "copy",
    "math",
    "random",
    "statistics",
    "itertools",
    "functools",
    "operator",
    "io",
    "sys",
    "json",
    "builtins",
    "typing",
]
PRELUDE = (
    "".join(f"from {m} import *\n" for m in _STAR)
    + "".join(f"import {m}\n" for m in _STAR if m not in ("builtins", "typing"))
    + "from typing import List, Dict, Any, Optional, Tuple\nfrom math import inf\n"
    + "sys.setrecursionlimit(6*10**5)\n"
)
# a case's test code arrives on stdin, read before the program runs (so that a program
# reading stdin at import time cannot eat it), then runs in the program's namespace
_RUN_AFTER = """
import sys as _rl_sys
_rl_case = _rl_sys.stdin.read()
exec(compile({program!r}, "<solution>", "exec"), globals())
exec(compile(_rl_case, "<test>", "exec"), globals())
"""
_CALL = """
import json as _rl_json, sys as _rl_sys
_rl_args = [_rl_json.loads(l) for l in _rl_sys.stdin.read().split("\\n") if l.strip()]
exec(compile({program!r}, "<solution>", "exec"), globals())
_rl_fn = Solution().{name} if "Solution" in globals() else globals()[{name!r}]
_rl_out = _rl_fn(*_rl_args)
print(_rl_json.dumps(list(_rl_out) if isinstance(_rl_out, tuple) else _rl_out))
"""
_FENCE = re.compile(r"```([\w+#\-.]*)\s*\n*(.*?)```", re.DOTALL)


def after_thinking(response: str) -> str:
    """What follows the reasoning: after the last `<|begin_of_solution|>`, then `</think>`."""
    for marker in ("<|begin_of_solution|>", "</think>"):
        if marker in response:
            response = response.split(marker)[-1].strip()
    return response


def program_of(response: str) -> str:
    """The program of a response, as ROLL's `extract_code_generation` finds it."""
    response = after_thinking(response)
    if "```" not in response:
        return response.strip()
    blocks = [body for _, body in _FENCE.findall(response)]
    if not blocks:
        blocks = re.findall(r"```(.*?)```", response, re.DOTALL)
    defining = [block for block in blocks if "def " in block]
    return (defining or blocks or [""])[0]


def test_cases_of(extra_info: Mapping[str, Any]) -> tuple[str, list[Any], str]:
    """(case_type, test_cases, test_case_function) of a row; ValueError when it has none."""
    if "test_cases" not in extra_info or "case_type" not in extra_info:
        raise ValueError(
            "a code sandbox row needs the columns case_type and test_cases (ROLL's KodCode "
            f"layout); this row has {sorted(extra_info)}"
        )
    cases = extra_info["test_cases"]
    if isinstance(cases, str):
        cases = json.loads(cases)
    if not isinstance(cases, list) or not cases:
        raise ValueError(f"test_cases must be a non-empty list, got {str(cases)[:80]!r}")
    function = extra_info.get("test_case_function")
    name = "" if function in (None, "", "None") else str(function)
    return str(extra_info["case_type"]), cases, name


def check_row(ground_truth: Any, extra_info: Mapping[str, Any]) -> None:
    """At load: the row holds test cases this scorer can run (ValueError if not)."""
    test_cases_of(extra_info)


def _assert_code(case: Any) -> str:
    return str(case["assert_code"] if isinstance(case, Mapping) else case)


def _with_test_runner(assert_code: str) -> str:
    """pytest-style test functions called in order (ROLL's runner for `def test_`)."""
    names = re.findall(r"^\s*def (test_\w*)\s*\(", assert_code, re.MULTILINE)
    return assert_code + "".join(f"\n{name}()" for name in names)


def _same_lines(printed: str, expected: str) -> bool:
    def lines(text: str) -> list[str]:
        return [line.strip() for line in text.strip().splitlines()]

    if lines(printed) == lines(expected):
        return True
    got, want = printed.split(), expected.split()
    if got == want:
        return True
    try:
        return len(got) == len(want) and all(
            math.isclose(float(a), float(b), rel_tol=1e-5, abs_tol=1e-8)
            for a, b in zip(got, want, strict=True)
        )
    except ValueError:
        return False


def _same_value(printed: str, expected: Any) -> bool:
    try:
        value = json.loads(printed)
        want = json.loads(expected) if isinstance(expected, str) else expected
    except (json.JSONDecodeError, TypeError):
        return False
    return value == want or (isinstance(want, list) and bool(want) and value == want[0])


def _limits(timeout_s: float, memory_mb: int) -> SandboxLimits:
    return SandboxLimits(
        timeout_s=timeout_s,
        cpu_s=max(1, math.ceil(timeout_s)),
        memory_mb=memory_mb,
        output_bytes=1 << 16,
    )


def _passed(results: Sequence[SandboxResult], count: int) -> int:
    return sum(1 for result in results[:count] if result.ok)


def code_sandbox(
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any],
    *,
    timeout_s: float = 20.0,
    memory_mb: int = 1024,
) -> dict[str, float]:
    """{"score", "acc", "pass_ratio"} of one response against its row's test cases
    (`timeout_s` and `memory_mb` per case: ROLL's local tests allow 20 s)."""
    case_type, cases, function = test_cases_of(extra_info)
    limits = _limits(timeout_s, memory_mb)
    if not solution_str.strip():
        return {"score": 0.0, "acc": 0.0, "pass_ratio": 0.0}
    response = after_thinking(solution_str)
    program = PRELUDE + program_of(response)
    if case_type == "text":
        tests = [_assert_code(c).replace("{response}", f"'''{response}'''") for c in cases]
        results = run_cases(_RUN_AFTER.format(program=PRELUDE), tests, limits)
        passed = _passed(results, len(tests))
    elif case_type in ("assert", "pytest"):
        tests = [_with_test_runner(_assert_code(c)) for c in cases]
        results = run_cases(_RUN_AFTER.format(program=program), tests, limits)
        passed = _passed(results, len(tests))
    elif case_type == "check_based":
        case = cases[0] if isinstance(cases[0], Mapping) else {"assert_code": cases[0]}
        lines = [line for line in str(case["assert_code"]).split("\n") if line]
        entry = case.get("entry_point", "candidate")
        program = PRELUDE + str(case.get("import_prefix", "")) + program_of(response)
        checks = [lines[0]] if len(lines) == 1 else [f"{lines[0]}\n{x}" for x in lines[1:]]
        tests = [f"{check}\ncheck({entry})" for check in checks]
        results = run_cases(
            _RUN_AFTER.format(program=program), tests, limits, stop_at_failure=False
        )
        passed = _passed(results, len(tests))
    else:
        stdins = [str(c["stdin"]) for c in cases]
        expected = [c["expected_stdout"] for c in cases]
        if function:
            results = run_cases(_CALL.format(program=program, name=function), stdins, limits)
            same = _same_value
        else:
            results = run_cases(program, stdins, limits)
            same = _same_lines
        passed = sum(
            1
            for result, want in zip(results, expected, strict=False)
            if result.ok and same(result.stdout, want)
        )
        tests = stdins
    correct = float(passed == len(tests))
    return {"score": correct, "acc": correct, "pass_ratio": passed / len(tests)}
