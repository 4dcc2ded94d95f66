"""A software-engineering task's reward (data source `swe_patch`): the response is a patch
(a unified diff, bare or in a ```diff fence) to the row's repository, and it scores 1 when
it applies and the row's tests then pass, 0 otherwise.

The row's ground truth holds the repository and its tests: `{"files": {path: text},
"tests": "<pytest-style test code>"}` (or that as JSON text). The patch is applied here as
`patch -p1` would apply it to the files (each hunk's context and removed lines must match
where it says; a hunk that does not match fails the patch), then the patched files are
written into a fresh sandbox folder (`rl.core.agent.sandbox`) and the tests run there,
their `test_*` functions called in order, under the sandbox's limits.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from rl.core.agent.sandbox import SandboxLimits, run_python

_FENCE = re.compile(r"```(?:diff|patch)?\s*\n(.*?)```", re.DOTALL)
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(ValueError):
    """A patch that does not apply, and why."""


def repository(ground_truth: Any) -> tuple[dict[str, str], str]:
    """(files, tests) of a row's ground truth."""
    truth = json.loads(ground_truth) if isinstance(ground_truth, str) else ground_truth
    if not isinstance(truth, Mapping) or not isinstance(truth.get("files"), Mapping):
        raise ValueError("a swe_patch row's ground truth needs `files` (path -> text)")
    tests = truth.get("tests")
    if not isinstance(tests, str) or not tests.strip():
        raise ValueError("a swe_patch row's ground truth needs `tests` (test code)")
    return {str(k): str(v) for k, v in truth["files"].items()}, tests


def patch_of(response: str) -> str:
    """The diff in a response: its last fenced block, else the response from its first
    `--- ` line."""
    fenced = _FENCE.findall(response)
    if fenced:
        return str(fenced[-1])
    start = response.find("--- ")
    return response[start:] if start >= 0 else ""


def apply_patch(files: Mapping[str, str], diff: str) -> dict[str, str]:
    """`files` with the unified `diff` applied (`patch -p1`: `a/` and `b/` stripped)."""
    patched = dict(files)
    lines = diff.splitlines()
    index = 0
    touched = 0
    while index < len(lines):
        if not (lines[index].startswith("--- ") and index + 1 < len(lines)):
            index += 1
            continue
        old, new = _path(lines[index][4:]), _path(lines[index + 1][4:])
        if not lines[index + 1].startswith("+++ "):
            raise PatchError(f"`--- {old}` is not followed by a `+++` line")
        index += 2
        source = [] if old is None else patched.get(old, "").splitlines()
        if old is not None and old not in patched:
            raise PatchError(f"the patch changes {old}, which the repository does not have")
        result, at = [], 0
        while index < len(lines) and lines[index].startswith("@@"):
            header = _HUNK.match(lines[index])
            if header is None:
                raise PatchError(f"cannot read the hunk header {lines[index]!r}")
            start = max(int(header.group(1)) - 1, 0)
            if int(header.group(2) or 1) == 0:  # a hunk that only adds, after line `start`
                start += 1
            result += source[at:start]
            at = start
            index += 1
            while index < len(lines) and not lines[index].startswith(("@@", "--- ")):
                line = lines[index]
                tag, text = (line[:1], line[1:]) if line else (" ", "")
                if tag in (" ", "-"):
                    if at >= len(source) or source[at] != text:
                        raise PatchError(f"a hunk of {new or old} does not match at line {at + 1}")
                    at += 1
                    if tag == " ":
                        result.append(text)
                elif tag == "+":
                    result.append(text)
                elif tag != "\\":  # "\ No newline at end of file"
                    raise PatchError(f"cannot read the patch line {line!r}")
                index += 1
        result += source[at:]
        if new is None:
            patched.pop(old or "", None)
        else:
            patched.pop(old or new, None)
            patched[new] = "\n".join(result) + "\n"
        touched += 1
    if not touched:
        raise PatchError("the response holds no unified diff (`--- a/...`, `+++ b/...`)")
    return patched


def _path(name: str) -> str | None:
    name = name.split("\t")[0].strip()
    if name == "/dev/null":
        return None
    return name[2:] if name.startswith(("a/", "b/")) else name


_RUN = """
import os, sys
for path, text in {files!r}.items():
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)
sys.path.insert(0, os.getcwd())
"""


def swe_patch(
    solution_str: str, ground_truth: Any, *, timeout_s: float = 20.0, memory_mb: int = 1024
) -> dict[str, float]:
    """{"score", "acc", "applied"} of one response's patch against its row's repository."""
    files, tests = repository(ground_truth)
    try:
        patched = apply_patch(files, patch_of(solution_str))
    except PatchError:
        return {"score": 0.0, "acc": 0.0, "applied": 0.0}
    names = re.findall(r"^def (test_\w*)\s*\(", tests, re.MULTILINE)
    code = _RUN.format(files=patched) + tests + "".join(f"\n{name}()" for name in names)
    limits = SandboxLimits(timeout_s=timeout_s, cpu_s=max(1, int(timeout_s)), memory_mb=memory_mb)
    passed = float(run_python(code, limits).ok)
    return {"score": passed, "acc": passed, "applied": 1.0}
