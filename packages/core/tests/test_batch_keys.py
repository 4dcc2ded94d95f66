"""Batch keys are one vocabulary (`rl.core.engines.BatchKey` / `BATCH_KEYS`): every string
key a shipped module reads from or writes into a batch is one of them, so a misspelt key
fails here instead of as a KeyError mid-run (or a silently absent column)."""

from __future__ import annotations

import ast
from pathlib import Path

from rl.core.engines import BATCH_KEYS

ROOT = Path(__file__).resolve().parents[3]
# the names a batch goes by in the trainer and the engines
BATCH_NAMES = {"batch", "micro", "mini", "local", "micro_batch", "mini_batch"}


def batch_key_uses(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, key) of every constant string key used on a batch-named variable:
    `batch["k"]`, `batch.get("k")`, `batch.pop("k")`, `"k" in batch`."""
    found = []
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Subscript) and _is_batch(node.value):
            key = node.slice
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "pop", "setdefault")
            and _is_batch(node.func.value)
            and node.args
        ):
            key = node.args[0]
        elif isinstance(node, ast.Compare) and any(_is_batch(c) for c in node.comparators):
            key = node.left
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            found.append((node.lineno, key.value))
    return found


def _is_batch(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id in BATCH_NAMES


def test_every_batch_key_in_shipped_code_is_a_declared_one():
    unknown, seen = [], 0
    for path in sorted(ROOT.glob("packages/*/src/**/*.py")):
        for line, key in batch_key_uses(ast.parse(path.read_text(encoding="utf-8"))):
            seen += 1
            if key not in BATCH_KEYS:
                unknown.append(f"{path.relative_to(ROOT)}:{line}: {key!r}")
    assert seen > 100  # the scan reads what it should
    assert not unknown, "keys outside rl.core.engines.BatchKey:\n" + "\n".join(unknown)


def test_the_scan_catches_a_misspelt_key():
    tree = ast.parse('x = batch["respons_mask"]\nif "values" in micro: pass\n')
    assert batch_key_uses(tree) == [(1, "respons_mask"), (2, "values")]
