"""The builtins that move a bash script's shell (`bash_run.Shell`) rather than compute a
value: `cd` / `pushd` / `popd` change the folder commands run in (a folder not known, or
one changed under a branch rl cannot decide, stays `Missing`), `shift` / `set --` the
positional arguments."""

from __future__ import annotations

import os
import posixpath
from typing import TYPE_CHECKING

from rl.cli.dialects.bash_conditions import Status
from rl.cli.dialects.bash_expand import Missing, Value, unset

if TYPE_CHECKING:
    from rl.cli.dialects.bash_run import Shell


def positional_change(shell: Shell, name: str, arguments: list[Value]) -> Status:
    if name == "set":
        if arguments and arguments[0].text == "--":
            shell.positional = arguments[1:]
        return True
    count = arguments[0].text if arguments else "1"
    if not count.isdigit():
        return Missing(f"shift {count}", "not a number")
    shell.positional = shell.positional[int(count) :]
    return True


def change_directory(shell: Shell, name: str, arguments: list[Value]) -> Status:
    words = [word for word in arguments if word.text not in ("--", "-L", "-P")]
    if name == "popd":
        shell.cwd = shell.directories.pop() if shell.directories else shell.cwd
        return True
    if not words:
        target = shell.variable("HOME") or Value("~", (unset("HOME"),))
    elif words[0].text == "-":
        target = shell.variable("OLDPWD") or Value("-", (unset("OLDPWD"),))
    else:
        target = words[0]
    if name == "pushd":
        shell.directories.append(shell.cwd)
    missing = shell.cwd.missing + target.missing
    if shell.under is not None:
        missing += (Missing(f"cd {target.text}", f"it runs {shell.under.what}"),)
    path = posixpath.normpath(posixpath.join(shell.cwd.text, target.text))
    shell.variables["OLDPWD"] = shell.cwd
    if missing:
        shell.cwd = Value(path, missing)
    elif os.path.isdir(path):
        shell.cwd = Value(path)
    else:
        shell.cwd = Value(path, (Missing(f"cd {target.text}", "no such folder here"),))
    return True
