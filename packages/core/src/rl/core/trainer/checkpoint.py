"""Checkpoints of a run: atomic, self-describing folders; pruning within the run; safe resume.

A checkpoint is written to `<dir>/.tmp-global_step_N` and closed by its
manifest (files, sizes, SHA-256, step, run id), then renamed to
`global_step_N`, then `latest` is replaced atomically. A crash or a failed
write at any point leaves the previous checkpoint and `latest` intact.

Runs and folders: a run lineage has one run id; a resumed run keeps the id of
the checkpoint it resumed. `max_ckpt_to_keep` prunes only checkpoints of the
current lineage, oldest written first, never the one just written. A run that
would start afresh in a folder that already holds checkpoints is refused
(resume it, or give the new run its own `trainer.output_dir`): two runs never
share a folder, so one can never prune, or resume from, the other's state.
"""

from __future__ import annotations

import logging
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rl.core.atomic_files import replace_dir, write_text
from rl.core.errors import CheckpointError, RunStopped
from rl.core.trainer.manifest import read_manifest, verify_checkpoint, write_manifest

STEP_DIR = re.compile(r"^global_step_(\d+)$")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ResumePoint:
    """A verified checkpoint to resume: its folder, its run lineage and its step."""

    path: Path
    run_id: str
    step: int


def checkpoint_dir(output_dir: str | Path) -> Path:
    return Path(output_dir) / "checkpoints"


def save_checkpoint(
    root: Path, step: int, write: Callable[[Path], None], keep: int | None, run_id: str
) -> Path:
    """Write a checkpoint with `write(tmp_dir)`, publish it atomically, prune the run's old ones.

    A write error (disk full, permissions) removes the partial folder and raises
    `CheckpointError`; the previous checkpoint and `latest` are untouched.
    """
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"global_step_{step}"
    tmp = root / f".tmp-{final.name}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir()
        write(tmp)
        write_manifest(tmp, run_id, step)
    except BaseException as error:
        shutil.rmtree(tmp, ignore_errors=True)
        interrupted = interruption(error)
        if interrupted is not None:  # a stop or Ctrl-C, whatever a library wrapped it in
            raise interrupted from None
        if isinstance(error, OSError):
            raise CheckpointError(_write_failed(root, final, error)) from error
        raise
    try:
        replace_dir(tmp, final)
        write_text(root / "latest", final.name)
    except OSError as error:
        raise CheckpointError(_write_failed(root, final, error)) from error
    if keep is not None and keep > 0:
        prune(root, run_id, keep, final)
    return final


def _write_failed(root: Path, final: Path, error: OSError) -> str:
    previous = _latest_name(root)
    kept = f"the previous checkpoint {root / previous} is intact" if previous else "none existed"
    return (
        f"could not write checkpoint {final}: {error.strerror or error} ({kept}); "
        f"free space in {root} and rerun with trainer.resume_mode=auto"
    )


def interruption(error: BaseException) -> BaseException | None:
    """The signal stop or Ctrl-C behind `error` (itself, or what it was raised from)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, (RunStopped, KeyboardInterrupt)):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _latest_name(root: Path) -> str | None:
    try:
        return (root / "latest").read_text().strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def step_folders(root: Path) -> list[Path]:
    """The `global_step_N` folders under `root`, by step."""
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := STEP_DIR.match(p.name))]
    return [path for _, path in sorted(found)]


def prune(root: Path, run_id: str, keep: int, just_written: Path) -> list[Path]:
    """Delete the run's oldest-written checkpoints so that `keep` remain; returns the deleted.

    Checkpoints of other runs and folders without a readable manifest are never touched.
    """
    ours = []
    for folder in step_folders(root):
        if folder == just_written:
            continue
        try:
            manifest = read_manifest(folder)
        except CheckpointError:
            continue
        if manifest["run_id"] == run_id:
            ours.append((manifest.get("written_at_ns", 0), manifest["step"], folder))
    ours.sort()
    doomed = [folder for *_, folder in ours[: max(0, len(ours) + 1 - keep)]]
    for folder in doomed:
        shutil.rmtree(folder, ignore_errors=True)
    return doomed


def find_resume_checkpoint(root: Path, mode: str, explicit: str | None) -> ResumePoint | None:
    """The verified checkpoint to resume (`auto`: the newest good one; `path`: that one;
    `disable`: none), or a `CheckpointError` when resuming or starting would be wrong."""
    if mode == "path":
        return _explicit(root, explicit)
    existing = step_folders(root)
    if mode == "disable":
        if existing:
            raise CheckpointError(
                f"{root} already holds checkpoints ({', '.join(p.name for p in existing)}) of "
                "an earlier run, and trainer.resume_mode=disable starts a new run there: "
                "continue that run with trainer.resume_mode=auto, give this one its own "
                f"trainer.output_dir, or move {root} aside"
            )
        return None
    return _newest_good(root, existing) if existing else None


def _explicit(root: Path, explicit: str | None) -> ResumePoint:
    folder = Path(explicit or "").expanduser()
    try:
        manifest = verify_checkpoint(folder)
    except CheckpointError as error:
        raise CheckpointError(f"trainer.resume_from_path: {error}") from None
    for other in step_folders(root):
        try:
            other_run = read_manifest(other)["run_id"]
        except CheckpointError:
            continue
        if other_run != manifest["run_id"]:
            raise CheckpointError(
                f"{other} belongs to another run (run id {other_run}) than "
                f"trainer.resume_from_path = {explicit} (run id {manifest['run_id']}); "
                "give the resumed run its own trainer.output_dir"
            )
    return ResumePoint(folder, manifest["run_id"], manifest["step"])


def _newest_good(root: Path, existing: list[Path]) -> ResumePoint:
    failures = []
    for folder in _newest_first(root, existing):
        try:
            manifest = verify_checkpoint(folder)
        except CheckpointError as error:
            log.warning("not resuming from %s: %s", folder, error)
            failures.append(str(error))
            continue
        if failures:
            log.warning("resuming from %s, the newest good checkpoint", folder)
        return ResumePoint(folder, manifest["run_id"], manifest["step"])
    raise CheckpointError(
        f"no checkpoint in {root} can be resumed ({failures[0]}{' ...' * (len(failures) > 1)}); "
        f"move {root} aside to start afresh"
    )


def _newest_first(root: Path, existing: list[Path]) -> list[Path]:
    """`latest` first, then the rest by time written (manifest), unreadable ones last."""

    def written(folder: Path) -> tuple[int, int]:
        try:
            manifest = read_manifest(folder)
        except CheckpointError:
            return (-1, int(STEP_DIR.match(folder.name).group(1)))  # type: ignore[union-attr]
        return (int(manifest.get("written_at_ns", 0)), manifest["step"])

    order = sorted(existing, key=written, reverse=True)
    latest = _latest_name(root)
    if latest is not None and (root / latest) in order:
        order.remove(root / latest)
        order.insert(0, root / latest)
    return order
