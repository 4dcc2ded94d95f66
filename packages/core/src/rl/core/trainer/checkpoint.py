"""Checkpoints of a run: atomic directories, keep-last-K, and finding one to resume from.

A checkpoint is written to `<dir>/.tmp-global_step_N`, then renamed to
`global_step_N`, then `latest` is replaced atomically; a crash at any point
leaves the previous checkpoint intact and `latest` pointing at a complete one.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

STEP_DIR = re.compile(r"^global_step_(\d+)$")


def checkpoint_dir(output_dir: str | Path) -> Path:
    return Path(output_dir) / "checkpoints"


def save_checkpoint(root: Path, step: int, write: Callable[[Path], None], keep: int | None) -> Path:
    """Write a checkpoint with `write(tmp_dir)`, publish it atomically, prune old ones."""
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"global_step_{step}"
    tmp = root / f".tmp-global_step_{step}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    write(tmp)
    _fsync_tree(tmp)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    latest_tmp = root / ".latest.tmp"
    latest_tmp.write_text(final.name)
    os.replace(latest_tmp, root / "latest")
    if keep is not None and keep > 0:
        for old in sorted(_steps(root))[:-keep]:
            shutil.rmtree(root / f"global_step_{old}", ignore_errors=True)
    return final


def _steps(root: Path) -> list[int]:
    return [int(m.group(1)) for p in root.iterdir() if (m := STEP_DIR.match(p.name))]


def _fsync_tree(path: Path) -> None:
    for file in path.rglob("*"):
        if file.is_file():
            with file.open("rb") as handle:
                os.fsync(handle.fileno())


def find_resume_checkpoint(root: Path, mode: str, explicit: str | None) -> Path | None:
    """The checkpoint to resume from: `auto` = latest complete one, `disable` = none, `path`."""
    if mode == "disable":
        return None
    if mode == "path":
        path = Path(explicit or "")
        if not (path / "trainer_state.pt").is_file():
            raise FileNotFoundError(
                f"trainer.resume_from_path = {explicit!r} is not a checkpoint "
                "(no trainer_state.pt); point it at a global_step_N folder"
            )
        return path
    latest = root / "latest"
    if latest.is_file():
        candidate = root / latest.read_text().strip()
        if (candidate / "trainer_state.pt").is_file():
            return candidate
    steps = sorted(_steps(root)) if root.is_dir() else []
    for step in reversed(steps):
        if (root / f"global_step_{step}" / "trainer_state.pt").is_file():
            return root / f"global_step_{step}"
    return None
