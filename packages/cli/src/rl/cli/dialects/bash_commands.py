"""The commands whose output a launch script's `$( )` may use, computed in Python (nothing
is run): `pwd`, `date`, `basename`, `dirname`, `realpath`, `readlink -f`, `nproc`, `echo`.
Any other command is `Unsupported`, so the value it would give is reported, not guessed."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Mapping
from datetime import datetime

from rl.cli.dialects.bash_date import DateProblem, date


class Unsupported(ValueError):
    """A command, or an option of one, that this reader does not compute."""


def basename(arguments: list[str]) -> str:
    """`basename NAME [SUFFIX]`, `basename -a|-s SUFFIX NAME...`."""
    suffix, names, many = "", [], False
    words = iter(arguments)
    for word in words:
        if word in ("-a", "--multiple"):
            many = True
        elif word in ("-s", "--suffix"):
            suffix, many = next(words, ""), True
        elif word.startswith("--suffix="):
            suffix, many = word.split("=", 1)[1], True
        elif word == "--":
            names += list(words)
        else:
            names.append(word)
    if not many and len(names) == 2:
        names, suffix = names[:1], names[1]
    if not names:
        raise Unsupported("basename without a name")
    return "\n".join(_basename(name, suffix) for name in names)


def _basename(name: str, suffix: str) -> str:
    stripped = name.rstrip("/")
    if not stripped:
        return "/" if name else ""
    base = stripped.rsplit("/", 1)[-1]
    return base[: -len(suffix)] if suffix and base.endswith(suffix) and base != suffix else base


def dirname(arguments: list[str]) -> str:
    """`dirname NAME...` (POSIX: `.` when NAME has no slash)."""
    names = [word for word in arguments if word != "--"]
    if not names:
        raise Unsupported("dirname without a name")
    return "\n".join(_dirname(name) for name in names)


def _dirname(name: str) -> str:
    stripped = name.rstrip("/")
    if not stripped:
        return "/" if name else "."
    if "/" not in stripped:
        return "."
    return stripped.rsplit("/", 1)[0].rstrip("/") or "/"


def realpath(arguments: list[str], cwd: str, options: tuple[str, ...]) -> str:
    """`realpath [-e|-m|-s] PATH...` / `readlink -f|-e|-m PATH...`: absolute, links followed."""
    names = [word for word in arguments if not word.startswith("-")]
    flags = [word for word in arguments if word.startswith("-") and word != "--"]
    unknown = [flag for flag in flags if flag not in options]
    if unknown or not names:
        raise Unsupported(f"the option {unknown[0]}" if unknown else "no path given")
    absolute = [posixpath.join(cwd, name) for name in names]
    if "-s" in flags or "--no-symlinks" in flags:
        return "\n".join(posixpath.normpath(path) for path in absolute)
    return "\n".join(os.path.realpath(path) for path in absolute)


def nproc(arguments: list[str], environ: Mapping[str, str]) -> str:
    """`nproc [--all]`: the processors this process may use (GNU nproc reads
    OMP_NUM_THREADS and OMP_THREAD_LIMIT first)."""
    if arguments == ["--all"]:
        return str(os.cpu_count() or 1)
    if arguments:
        raise Unsupported(f"the option {arguments[0]}")
    count = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = environ.get("OMP_NUM_THREADS", "").split(",")[0]
    if threads.isdigit() and int(threads) > 0:
        count = int(threads)
    limit = environ.get("OMP_THREAD_LIMIT", "")
    if limit.isdigit() and int(limit) > 0:
        count = min(count or 1, int(limit))
    return str(count or 1)


def echo(arguments: list[str]) -> str:
    """`echo [-n] WORD...` (without -e's escapes)."""
    newline = True
    while arguments and arguments[0] in ("-n", "-E"):
        newline = newline and arguments[0] != "-n"
        arguments = arguments[1:]
    if arguments and arguments[0].startswith("-e"):
        raise Unsupported("echo -e")
    return " ".join(arguments) + ("\n" if newline else "")


def output(
    name: str, arguments: list[str], cwd: str, now: datetime, environ: Mapping[str, str]
) -> str:
    """What the command `name ARGUMENTS` prints (Unsupported when it is not computed here)."""
    commands: dict[str, Callable[[], str]] = {
        "pwd": lambda: (os.path.realpath(cwd) if "-P" in arguments else cwd) + "\n",
        "date": lambda: date(arguments, now) + "\n",
        "basename": lambda: basename(arguments) + "\n",
        "dirname": lambda: dirname(arguments) + "\n",
        "realpath": lambda: (
            realpath(arguments, cwd, ("-e", "-m", "-s", "-q", "--no-symlinks")) + "\n"
        ),
        "readlink": lambda: _readlink(arguments, cwd) + "\n",
        "nproc": lambda: nproc(arguments, environ) + "\n",
        "echo": lambda: echo(arguments),
    }
    if name not in commands:
        raise Unsupported(f"`{name}`")
    try:
        return commands[name]()
    except DateProblem as problem:
        raise Unsupported(f"date with {problem}") from None


def _readlink(arguments: list[str], cwd: str) -> str:
    if not any(flag in arguments for flag in ("-f", "-e", "-m")):
        raise Unsupported("readlink without -f")
    return realpath(arguments, cwd, ("-f", "-e", "-m", "-n", "-q"))


COMMANDS = ("pwd", "date", "basename", "dirname", "realpath", "readlink", "nproc", "echo")
