"""The test files that hold GPU tests, in every package (`nox -s gpu_tests` runs these).

A file holds GPU tests when it names `pytest.mark.gpu` or `pytest.mark.multigpu`. Only
those files are collected, so a GPU box that lacks the CPU stack's optional packages
(vLLM, Ray, megatron-core) never imports the tests that need them. What the GPU files
themselves import (hypothesis, omegaconf, ...) the campaign installs from its wheel
folder (scripts/gpu_wheels.py).

`python scripts/gpu_test_files.py` prints them, one a line, relative to the repository.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = re.compile(r"\bmark\.(gpu|multigpu)\b")


def gpu_test_files(root: Path = ROOT) -> list[Path]:
    """Every packages/*/tests/**/test_*.py naming the gpu or multigpu mark, sorted."""
    return sorted(
        path
        for path in (root / "packages").glob("*/tests/**/test_*.py")
        if MARK.search(path.read_text(encoding="utf-8"))
    )


if __name__ == "__main__":
    for path in gpu_test_files():
        print(path.relative_to(ROOT))
