"""Paths as configs write them: `~` and `~user` expand like a shell's."""

from __future__ import annotations

from pathlib import Path


def user_path(value: str) -> Path:
    """`value` with `~` expanded; unchanged when that home folder is unknown (`~nobody/x`),
    so the caller reports a path that does not exist rather than crashing."""
    path = Path(value)
    try:
        return path.expanduser()
    except RuntimeError:  # "Could not determine home directory"
        return path
