"""A checkpoint's manifest: what it holds (files, sizes, SHA-256), its step and its run.

`manifest.json` is the last file written into a checkpoint folder, so a folder
without one is incomplete. Resume verifies every file against it; a mismatch
names the file and what is wrong with it.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rl.core.errors import CheckpointError

MANIFEST = "manifest.json"
FORMAT = 1
_CHUNK = 8 << 20


def new_run_id() -> str:
    """The id of a run lineage: a fresh run draws one, a resumed run keeps its checkpoint's."""
    return uuid.uuid4().hex[:12]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)  # releases the GIL on large buffers: files hash in parallel
    return digest.hexdigest()


def _data_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST)


def write_manifest(folder: Path, run_id: str, step: int) -> dict[str, Any]:
    """Describe every file under `folder` in `folder/manifest.json` (fsynced, with the files)."""
    files = _data_files(folder)
    with ThreadPoolExecutor(max_workers=min(8, max(1, len(files)))) as pool:
        digests = list(pool.map(sha256_of, files))
    manifest = {
        "format": FORMAT,
        "run_id": run_id,
        "step": step,
        "written_at_ns": time.time_ns(),
        "files": {
            str(file.relative_to(folder)): {"size": file.stat().st_size, "sha256": digest}
            for file, digest in zip(files, digests, strict=True)
        },
    }
    for file in files:
        _fsync(file)
    path = folder / MANIFEST
    path.write_text(json.dumps(manifest, indent=1))
    _fsync(path)
    return manifest


def _fsync(path: Path) -> None:
    with path.open("rb") as handle:
        os.fsync(handle.fileno())


def read_manifest(folder: Path) -> dict[str, Any]:
    """The manifest of `folder`, without checking the files; CheckpointError if unreadable."""
    path = folder / MANIFEST
    if not folder.is_dir():
        raise CheckpointError(f"{folder} is not a folder")
    if not path.is_file():
        raise CheckpointError(
            f"{path} is missing: the checkpoint is incomplete, or was not written by rl"
        )
    try:
        manifest = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{path} is unreadable ({error})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not an rl checkpoint manifest of format {FORMAT}")
    for key, kind in (("run_id", str), ("step", int), ("files", dict)):
        if not isinstance(manifest.get(key), kind):
            raise CheckpointError(f"{path}: '{key}' is missing or not a {kind.__name__}")
    return manifest


def verify_checkpoint(folder: Path, *, checksums: bool = True) -> dict[str, Any]:
    """The manifest of `folder` once every file it lists is there with its size and checksum.

    Raises `CheckpointError` naming the first file that is missing, truncated or corrupt.
    """
    manifest = read_manifest(folder)
    entries = manifest["files"]
    for name, entry in entries.items():
        file = folder / name
        if not file.is_file():
            raise CheckpointError(f"{file} is missing (listed in {folder / MANIFEST})")
        size = file.stat().st_size
        if size != entry.get("size"):
            raise CheckpointError(
                f"{file} has {size} bytes, the manifest says {entry.get('size')} (truncated "
                "or overwritten)"
            )
    if checksums:
        names = list(entries)
        with ThreadPoolExecutor(max_workers=min(8, max(1, len(names)))) as pool:
            digests = list(pool.map(lambda n: sha256_of(folder / n), names))
        for name, digest in zip(names, digests, strict=True):
            if digest != entries[name].get("sha256"):
                raise CheckpointError(f"{folder / name} does not match its SHA-256 (corrupt)")
    return manifest
