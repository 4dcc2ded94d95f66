"""The software-engineering reward: patches applied as GNU patch applies them (the system's
`patch -p1` is the oracle on the same files), then the row's tests run in the sandbox."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from rl.core.rewards.registry import default_compute_score
from rl.core.rewards.swe_patch import PatchError, apply_patch, patch_of

FILES = {
    "calc.py": "def add(a, b):\n    return a - b\n\n\ndef double(x):\n    return add(x, x)\n",
    "pkg/util.py": "NAME = 'old'\n",
}
TESTS = "from calc import add, double\n\ndef test_add():\n    assert add(2, 3) == 5\n\ndef test_double():\n    assert double(4) == 8\n"
TRUTH = json.dumps({"files": FILES, "tests": TESTS})
RIGHT = """--- a/calc.py
+++ b/calc.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a + b
"""
WRONG = RIGHT.replace("a + b", "a * b")
TWO_FILES = (
    RIGHT
    + """--- a/pkg/util.py
+++ b/pkg/util.py
@@ -1 +1,2 @@
-NAME = 'old'
+NAME = 'new'
+VERSION = 2
"""
)


@pytest.mark.skipif(shutil.which("patch") is None, reason="GNU patch is not installed")
@pytest.mark.parametrize("diff", [RIGHT, WRONG, TWO_FILES])
def test_a_patch_applies_as_gnu_patch_applies_it(tmp_path, diff):
    for path, text in FILES.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    subprocess.run(["patch", "-p1"], input=diff, text=True, cwd=tmp_path, check=True)
    ours = apply_patch(FILES, diff)
    for path in FILES:
        assert ours[path] == (tmp_path / path).read_text(), path


def test_a_patch_that_does_not_match_or_is_not_there_fails():
    with pytest.raises(PatchError, match="does not match"):
        apply_patch(FILES, RIGHT.replace("a - b", "a / b"))
    with pytest.raises(PatchError, match="does not have"):
        apply_patch(FILES, RIGHT.replace("calc.py", "other.py"))
    with pytest.raises(PatchError, match="no unified diff"):
        apply_patch(FILES, "I fixed it.")


def test_the_fenced_patch_is_read_from_the_answer():
    assert patch_of(f"Here it is:\n```diff\n{RIGHT}```\nDone.") == RIGHT
    assert patch_of(f"Patch:\n{RIGHT}") == RIGHT


@pytest.mark.parametrize(
    ("answer", "score", "applied"),
    [(f"```diff\n{RIGHT}```", 1.0, 1.0), (WRONG, 0.0, 1.0), ("no patch", 0.0, 0.0)],
)
def test_the_right_patch_scores_1_and_others_0(answer, score, applied):
    result = default_compute_score("swe_patch", answer, TRUTH)
    assert (result["score"], result["applied"]) == (score, applied)


def test_tests_that_hang_fail_within_the_sandbox_s_time():
    truth = json.dumps({"files": FILES, "tests": "def test_forever():\n    while True: pass\n"})
    from rl.core.rewards.swe_patch import swe_patch

    assert swe_patch(RIGHT, truth, timeout_s=1.0)["score"] == 0.0
