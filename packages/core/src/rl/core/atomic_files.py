"""Writes that are all or nothing: a file or folder appears whole under its name, or the
previous one stays.

Everything a run writes for keeps (`config.yaml`, the metrics after a resume trims them,
the Hugging Face export, checkpoints) goes through here: write to a temporary sibling,
fsync, rename over the final name. A crash, a full disk or a signal at any point leaves
either the old file or the new one, never a mix. Files get the modes the user's umask
gives (nothing here narrows them).
"""

from __future__ import annotations

import errno
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from rl.core.errors import UserError

# The errors of a write that the user fixes (space, quota, a file-size limit, permissions,
# a read-only disk, a failing disk).
USER_ERRNOS = {
    errno.ENOSPC,
    errno.EDQUOT,
    errno.EFBIG,
    errno.EACCES,
    errno.EPERM,
    errno.EROFS,
    errno.EIO,
}


class WriteError(UserError, OSError):
    """A file the run writes could not be written; the message names it, says why, what
    stays as it was and how much space the write needed."""

    def __str__(self) -> str:
        return str(self.args[0])


def write_text(path: Path, text: str) -> None:
    """`text` to `path`, atomically (the previous content stays on any failure)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with tmp.open("w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as error:
        tmp.unlink(missing_ok=True)
        raise write_error(path, error, needed=len(text.encode())) from error


def write_dir(final: Path, write: Callable[[Path], None], needed: int | None = None) -> None:
    """A folder written by `write(tmp)` into a temporary sibling, fsynced, then put in
    place of `final`: a failure removes the partial folder and keeps the old `final`."""
    tmp = final.with_name(f".tmp-{final.name}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        write(tmp)
        fsync_tree(tmp)
        replace_dir(tmp, final)
    except BaseException as error:
        shutil.rmtree(tmp, ignore_errors=True)
        failure = os_error_of(error)
        if failure is None:
            raise
        raise write_error(final, failure, needed=needed) from error


def os_error_of(error: BaseException) -> OSError | None:
    """`error` as the OS error behind it: itself, or one a library reported in its own
    exception type (safetensors' and Rust's "(os error 28)"), else None."""
    if isinstance(error, OSError):
        return error
    if not isinstance(error, Exception):
        return None
    found = re.search(r"os error (\d+)", str(error))
    if found is None:
        return None
    number = int(found.group(1))
    return OSError(number, os.strerror(number))


def replace_dir(tmp: Path, final: Path) -> None:
    """Rename `tmp` to `final`; an existing `final` is moved aside first and removed only
    once the new one is in place."""
    old = final.with_name(f".old-{final.name}")
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    _fsync_dir(final.parent)
    shutil.rmtree(old, ignore_errors=True)


def fsync_tree(folder: Path) -> None:
    """Flush every file under `folder` (and the folders themselves) to the disk."""
    for root, _, files in os.walk(folder):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(root))


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some file systems cannot fsync a folder
        pass
    finally:
        os.close(fd)


def write_error(path: Path, error: OSError, needed: int | None = None) -> OSError:
    """A `WriteError` naming `path` for an error the user fixes, else `error` itself."""
    if error.errno not in USER_ERRNOS:
        return error
    reason = error.strerror or str(error)
    space = ""
    if error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        space = f"; {_free_space(path)}"
        if needed:
            space += f", the write needs about {_size(needed)}"
    failure = WriteError(f"could not write {path}: {reason}{space}; what was there before is kept")
    failure.errno, failure.filename = error.errno, str(path)
    return failure


def _free_space(path: Path) -> str:
    folder = path if path.is_dir() else path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return f"{_size(shutil.disk_usage(folder).free)} free in {folder}"
    except OSError:
        return f"free space in {folder} unknown"


def _size(count: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1024 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024  # type: ignore[assignment]
    return f"{count} B"
