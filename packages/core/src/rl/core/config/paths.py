"""Paths as configs write them: `~` and `~user` expand like a shell's; `pkg://a.b.c` names
the file of an installed Python module (Hydra's form), so that a config naming a file that
ships with a package (a converted config's scorer) holds on any machine."""

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


PACKAGE = "pkg://"


def python_file(value: str) -> Path:
    """The file `value` names: `pkg://dotted.module` -> that module's file where it is
    installed (found without importing it; a path that does not exist when it is not),
    else `user_path(value)`."""
    if not value.startswith(PACKAGE):
        return user_path(value)
    import importlib.util

    name = value[len(PACKAGE) :]
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None or spec.origin is None:
        return Path(f"<no module {name}>")
    return Path(spec.origin)
