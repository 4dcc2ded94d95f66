"""The OS boundary the sandbox runs inside (what each one holds: `rl.core.agent.sandbox`).

`reward.sandbox.boundary` picks it: `auto` (the default) takes the first that works on this
machine of `bwrap` (bubblewrap: read-only `/`, a writable bind of the work folder alone, no
network, its own pid, IPC and UTS namespaces, no capabilities, killed with its parent),
`unshare` (user, mount, network, pid, IPC and UTS namespaces; every mount read-only but the
work folder, then no capabilities) and `guard` (the audit hook alone). Each is probed once per process by running
a real sandboxed program through it. The choice travels to the processes the trainer starts
(reward pool workers) in the environment variable RL_SANDBOX_BOUNDARY.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import tempfile

from rl.core.errors import ConfigError

log = logging.getLogger(__name__)

KEY = "reward.sandbox.boundary"
BOUNDARIES = ("bwrap", "unshare", "guard")  # strongest first: the order `auto` tries them
CHOICES = ("auto", *BOUNDARIES)
ENV = "RL_SANDBOX_BOUNDARY"
DESCRIPTION = {
    "bwrap": "bubblewrap: read-only /, writable work folder, no network, own pid namespace",
    "unshare": "user namespaces: read-only mounts but the work folder, no network, own pids",
    "guard": "the audit-hook guard alone: no OS boundary on this machine",
}


class SandboxUnavailable(ConfigError):
    """The boundary asked for does not work on this machine."""


def command(boundary: str, workdir: str) -> list[str]:
    """The words that run a command inside `boundary` with `workdir` writable (to prefix)."""
    if boundary == "bwrap":
        return [
            shutil.which("bwrap") or "bwrap",
            "--ro-bind", "/", "/",
            "--dev", "/dev",
            "--proc", "/proc",
            "--bind", workdir, workdir,
            "--chdir", workdir,
            "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--cap-drop", "ALL",
            "--die-with-parent",
            "--",
        ]  # fmt: skip
    if boundary == "unshare":
        return [
            shutil.which("unshare") or "unshare",
            "--user", "--map-root-user", "--mount", "--net", "--pid", "--ipc", "--uts",
            "--fork", "--kill-child",
            "--",
            # a shell between: unshare cannot pass on a child's death by signal (it fails
            # to re-raise it), the shell reports it as 128 + N, as bwrap does
            "sh", "-c", '"$@"; exit $?', "sh",
        ]  # fmt: skip
    return []


def remounts(boundary: str) -> bool:
    """Whether the sandboxed process itself makes the mounts read-only (`unshare`)."""
    return boundary == "unshare"


@functools.cache
def why_not(boundary: str) -> str:
    """ "" when `boundary` works here, else why not (probed once per process)."""
    if boundary == "guard":
        return ""
    if shutil.which(boundary) is None:
        return f"{boundary} is not on PATH"
    from rl.core.agent.sandbox import SandboxLimits, run_python

    probe = "import os; open('probe', 'w').write('ok'); print(os.getpid())"
    with tempfile.TemporaryDirectory(prefix="rl-sandbox-probe-") as outside:
        escape = f"\ntry:\n    open({outside + '/x'!r}, 'w')\nexcept OSError:\n    pass"
        result = run_python(
            probe + escape, SandboxLimits(timeout_s=20, cpu_s=10), boundary=boundary, inner=False
        )
        leaked = os.path.exists(os.path.join(outside, "x"))
    if not result.ok:
        return f"{boundary} fails here: {result.error() or result.stderr.strip()[-200:]}"
    if leaked:
        return f"{boundary} does not keep writes inside the work folder here"
    return ""


def available() -> list[str]:
    """The boundaries that work on this machine, strongest first (`guard` always)."""
    return [name for name in BOUNDARIES if not why_not(name)]


@functools.cache
def _resolve(asked: str) -> str:
    if asked not in CHOICES:
        raise SandboxUnavailable(
            f"{KEY} = {asked!r} (or {ENV}): expected one of {', '.join(CHOICES)}"
        )
    if asked == "auto":
        chosen = next(name for name in BOUNDARIES if not why_not(name))
    elif why_not(asked):
        raise SandboxUnavailable(
            f"{KEY} = {asked}: {why_not(asked)}; install it (bubblewrap: "
            f"`apt-get install bubblewrap`) or set {KEY} to auto or one of "
            f"{', '.join(available())}"
        )
    else:
        chosen = asked
    _say(chosen)
    return chosen


_SAID: set[str] = set()


def _say(chosen: str) -> None:
    """One line per process for the boundary in force; a warning when no OS boundary holds
    the sandbox (the weaker promise is worth seeing)."""
    if chosen not in _SAID:
        _SAID.add(chosen)
        level = logging.WARNING if chosen == "guard" else logging.INFO
        log.log(level, "sandbox boundary: %s (%s; %s)", chosen, DESCRIPTION[chosen], KEY)


def in_force() -> str:
    """The boundary sandboxed code runs inside in this process: bwrap, unshare or guard."""
    return _resolve(os.environ.get(ENV, "auto"))


def choose(asked: str) -> str:
    """Use `asked` (a value of `reward.sandbox.boundary`) in this process and the ones it
    starts; `SandboxUnavailable` naming the key when it does not work here."""
    chosen = _resolve(asked)
    os.environ[ENV] = chosen  # what `auto` found: the processes started skip the search
    return chosen
