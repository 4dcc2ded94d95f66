"""One run per `trainer.output_dir`: a lock held for the run's life, and no fresh run over a
finished one.

The lock is an advisory `flock` on `<output_dir>/.rl-run.lock`, taken before anything is
written there and released by the OS when the process ends, however it ends (a SIGKILL
included): a second run on the same folder is refused, naming the holder's pid and host.

A run that starts afresh (no checkpoint to resume) in a folder holding an earlier run that
trained (its exported model, its checkpoints, metrics of a trained step) is refused:
resume it (its checkpoints and `trainer.resume_mode=auto`) or give the new run its own
`trainer.output_dir`. `trainer.overwrite_output_dir=true` says the old run may go: its
files are removed when the new run starts (other files in the folder are left alone). A
run that stopped before its first step may be started again over.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rl.core.errors import RunFolderError
from rl.core.logging.sinks import step_rows

LOCK_FILE = ".rl-run.lock"
# What a run writes in its folder: an overwrite removes them.
RUN_FILES = (
    "config.yaml",
    "metrics.jsonl",
    "metrics.png",
    "val_generations.jsonl",
    "config_changes.jsonl",
    "hf",
    "checkpoints",
    "tensorboard",
)


@contextmanager
def hold(output_dir: Path) -> Iterator[None]:
    """Hold `output_dir`'s run lock for the body (a `RunFolderError` when another run has it)."""
    output_dir.mkdir(parents=True, exist_ok=True)
    path = output_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunFolderError(
                f"trainer.output_dir {output_dir} is in use by another run "
                f"({_holder(path)}); wait for it to end or stop it, or give this run its "
                "own trainer.output_dir"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(_me()).encode())
        yield
    finally:
        os.close(fd)  # releases the lock


def _me() -> dict[str, object]:
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "command": " ".join(sys.argv)[:300],
    }


def _holder(path: Path) -> str:
    try:
        info = json.loads(path.read_text())
        return f"pid {info['pid']} on {info['host']}, started {info['started']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not said who it is yet"


def trained_run(output_dir: Path) -> list[str]:
    """What in `output_dir` shows an earlier run that trained: its exported model, its
    checkpoints, metrics of a trained step. (A run that never finished a step leaves
    nothing worth keeping: a rerun of the same command after fixing it may start over.)"""
    found = []
    if (output_dir / "hf").exists():
        found.append("hf/")
    checkpoints = output_dir / "checkpoints"
    if checkpoints.is_dir() and any(checkpoints.glob("global_step_*")):
        found.append("checkpoints/")
    trained = _trained_steps(output_dir / "metrics.jsonl")
    if trained:
        found.append(f"metrics.jsonl ({trained} trained steps)")
    return found


def _trained_steps(path: Path) -> int:
    try:
        rows = list(step_rows(path))
    except OSError:
        return 0
    return len({step for _, _, step in rows if isinstance(step, int) and step >= 1})


def clear(output_dir: Path) -> None:
    """Remove an earlier run's files (a fresh run starts with none of them)."""
    for name in RUN_FILES:
        target = output_dir / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()


def refuse_overwrite(output_dir: Path, overwrite: bool) -> None:
    """Before a fresh run: refuse a folder holding an earlier run that trained, unless
    `trainer.overwrite_output_dir` allows it to go."""
    if overwrite:
        return
    found = trained_run(output_dir)
    if not found:
        return
    raise RunFolderError(
        f"trainer.output_dir {output_dir} holds an earlier run ({', '.join(found)}) that this "
        "fresh run would overwrite; "
        + (
            "resume it with trainer.resume_mode=auto, "
            if "checkpoints/" in found
            else "it has no checkpoint to resume, so "
        )
        + "give this run its own trainer.output_dir, or pass trainer.overwrite_output_dir=true "
        "to replace it"
    )
