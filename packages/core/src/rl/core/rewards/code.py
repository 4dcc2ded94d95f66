"""Code-execution reward: the model's program runs against test cases in the sandbox of
the agent's Python tool (`rl.core.agent.sandbox`, whose docstring states what it
guarantees under each boundary: CPU, memory and wall-clock limits, one process, no network,
no file-system change outside a temporary directory).

The ground truth takes verl's code-test form: `{"inputs": [...], "outputs": [...]}` (a
mapping or its JSON text), one entry per test case. Standard-input programs read
`inputs[i]` and must print `outputs[i]` (compared line by line, trailing whitespace and
blank trailing lines ignored). With `"fn_name"`, the program defines that function;
`inputs[i]` is its argument list and `outputs[i]` its return value (compared as JSON; a
one-item list `[value]` is accepted too, as APPS writes them). The program is the last
```python block of the response, else the whole response. The score is 1.0 when every case
passes, else 0.0; a case that times out, crashes or breaks a limit fails.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from rl.core.agent.sandbox import SandboxLimits, run_cases

# verl's data sources for code tasks
DATA_SOURCES = ("codecontests", "apps", "codeforces", "taco", "code")
_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)
_CALL = """
import json as _json, sys as _sys
_result = {name}(*_json.loads(_sys.stdin.read()))
print(_json.dumps(_result))
"""


def program_of(solution: str) -> str:
    """The last fenced Python block of `solution`, else all of it."""
    blocks = _BLOCK.findall(solution)
    return blocks[-1] if blocks else solution


def cases_of(ground_truth: Any) -> tuple[list[Any], list[Any], str | None]:
    """(inputs, outputs, fn_name) of verl's code-test ground truth; ValueError if malformed."""
    tests = ground_truth
    if isinstance(ground_truth, str):
        try:
            tests = json.loads(ground_truth)
        except json.JSONDecodeError:
            tests = None
    if not isinstance(tests, Mapping) or not {"inputs", "outputs"} <= tests.keys():
        raise ValueError(
            'a code task\'s ground truth must be {"inputs": [...], "outputs": [...]} '
            f"(or its JSON text), got {str(ground_truth)[:80]!r}"
        )
    inputs, outputs = list(tests["inputs"]), list(tests["outputs"])
    if len(inputs) != len(outputs) or not inputs:
        raise ValueError(
            f"a code task needs as many outputs as inputs, at least one: got {len(inputs)} "
            f"inputs and {len(outputs)} outputs"
        )
    name = tests.get("fn_name")
    return inputs, outputs, str(name) if name else None


def _same_text(printed: str, expected: Any) -> bool:
    def lines(text: str) -> list[str]:
        return [line.rstrip() for line in text.rstrip().splitlines()]

    return lines(printed) == lines(str(expected))


def _same_value(printed: str, expected: Any) -> bool:
    try:
        value = json.loads(printed)
    except json.JSONDecodeError:
        return False
    return value == expected or [value] == expected


def code(solution: str, ground_truth: Any, limits: SandboxLimits | None = None) -> float:
    """1.0 when the program passes every test case, else 0.0."""
    inputs, outputs, fn_name = cases_of(ground_truth)
    program = program_of(solution)
    if fn_name is not None:
        program += _CALL.format(name=fn_name)
    limits = limits or SandboxLimits(timeout_s=5.0, cpu_s=5)
    stdins = [json.dumps(given) if fn_name is not None else str(given) for given in inputs]
    # one start of the sandbox for all cases, a fresh process each; it stops at a crash
    results = run_cases(program, stdins, limits)
    if len(results) < len(inputs):
        return 0.0
    same = _same_value if fn_name is not None else _same_text
    passed = all(r.ok and same(r.stdout, e) for r, e in zip(results, outputs, strict=True))
    return 1.0 if passed else 0.0
