"""Run untrusted Python (a model's code) in a subprocess: the sandbox of the agent's
`python` tool and of the code reward (`rl.core.rewards.code`). This docstring is its promise;
the other places link here.

Under every boundary (the inner guard, `rl.core.agent.sandbox_guard`, runs first in the
sandboxed process):
- a fresh process and a fresh temporary folder, its current directory, for each run (each
  case of `run_cases`: a server that runs no user code forks one per case), all removed
  afterwards;
- CPU seconds (RLIMIT_CPU) and address space (RLIMIT_AS) limits that the code cannot raise,
  a wall-clock timeout after which its process is killed (and the whole process group if
  the server overruns), files and output capped (RLIMIT_FSIZE), no core dumps;
- one process runs the code: fork, exec, spawn, subprocess, `_posixsubprocess` and signals
  to other processes are refused (so a fork bomb stops at its first fork);
- no network: every socket call is refused;
- no file-system change outside the work folder: creating, writing, appending, truncating,
  removing, renaming, linking, symlinking, making directories, FIFOs or device nodes,
  changing modes, owners, times or extended attributes are all refused there (one test a
  kind: tests/agent/test_sandbox_writes.py); the directory is fixed (os.chdir refused);
  reading is not restricted;
- a limit that is hit is a result with an error (a failed case for the code reward, a tool
  error for the agent), never an exception in the caller.

What holds it, by `reward.sandbox.boundary` (`rl.core.agent.sandbox_boundary`; `auto`, the
default, takes the strongest that works here; `in_force()` says which, and each process
logs it once, when it first runs sandboxed code; a boundary named in the config is checked
by the preflight):
- `bwrap` (bubblewrap) -- an OS boundary: `/` is mounted read-only, the work folder alone
  writable; a network namespace of its own (a loopback of its own, nothing else); its own
  pid, IPC and UTS namespaces; no capabilities (and no way to gain one); killed with the
  trainer. Writes outside and network
  connections fail in the kernel even for code that gets past the guard. Not guaranteed:
  reads (the code can read what the trainer's user can read), CPU cores and memory
  bandwidth shared with the trainer, kernel bugs.
- `unshare` (user namespaces) -- the same kind of boundary built with unshare(1): user,
  mount, network (no interface up), pid, IPC and UTS namespaces; every mount but the work
  folder remounted read-only, then every capability dropped, so that the namespace's root
  cannot remount them writable. Not guaranteed: the same as bwrap.
- `guard` -- no OS boundary: the audit hook alone (a warning says so at start). It refuses
  what CPython reports, and replaces the calls CPython does not report (os.mkfifo,
  os.mknod); path objects other than str, bytes and pathlib's are refused (one of the
  user's own could answer the call and the guard differently). It is a guard against
  honest mistakes and casual escapes, not a security boundary against a determined
  adversary: code that rewrites pathlib's internals, reaches a C extension that makes
  system calls, or uses an interpreter bug can get past it.

Every boundary is tested with an escape attempt (writes outside, the network, the trainer's
processes) with the guard left out: tests/agent/test_sandbox_boundary.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rl.core.agent import sandbox_boundary
from rl.core.agent.sandbox_guard import PRELUDE


@dataclass(frozen=True)
class SandboxLimits:
    timeout_s: float = 5.0  # wall clock; the process group is killed after it
    cpu_s: int = 5  # RLIMIT_CPU
    memory_mb: int = 512  # RLIMIT_AS
    output_bytes: int = 4096  # stdout and stderr are each cut to this


@dataclass(frozen=True)
class SandboxResult:
    stdout: str
    stderr: str
    returncode: int | None
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def error(self) -> str:
        """What went wrong, in one line for the model ("" when it ran cleanly)."""
        if self.timed_out:
            return "timed out"
        if self.returncode == 0:
            return ""
        if self.returncode is not None and self.returncode < 0:
            name = signal.Signals(-self.returncode).name
            return f"killed by {name} (a CPU, memory or output-size limit)"
        lines = [line for line in self.stderr.strip().splitlines() if line.strip()]
        return lines[-1] if lines else f"exit status {self.returncode}"


def run_python(
    code: str,
    limits: SandboxLimits | None = None,
    stdin: str = "",
    *,
    boundary: str | None = None,
    inner: bool = True,
) -> SandboxResult:
    """Run `code` under `limits` in a fresh temporary directory (removed afterwards), with
    `stdin` as its standard input. Its stdout and stderr go to files there, each capped by
    RLIMIT_FSIZE, so that output cannot fill the caller's memory; the first `output_bytes`
    of stdout and the last of stderr come back. It runs inside `boundary` (bwrap, unshare or
    guard; default: the one in force, `sandbox_boundary.in_force()`); `inner=False` leaves
    the guard out, to test a boundary alone."""
    return run_cases(code, [stdin], limits, boundary=boundary, inner=inner)[0]


def run_cases(
    code: str,
    stdins: Sequence[str],
    limits: SandboxLimits | None = None,
    *,
    stop_at_failure: bool = True,
    boundary: str | None = None,
    inner: bool = True,
) -> list[SandboxResult]:
    """Run `code` once per input of `stdins`, as `run_python` does, under one start of the
    boundary: a server process (which runs no user code) forks a fresh process per case,
    each in a folder of its own, with `limits` each (the wall clock per case). With
    `stop_at_failure` the list ends at the first case that does not exit cleanly."""
    limits = limits or SandboxLimits()
    boundary = boundary or sandbox_boundary.in_force()
    cap = max(limits.output_bytes * 16, 1 << 20)  # bytes a file (or the output) may reach
    with tempfile.TemporaryDirectory(prefix="rl-sandbox-") as workdir:
        work = Path(workdir)
        for index, given in enumerate(stdins):
            (work / f"case{index}").mkdir()
            (work / f"case{index}" / ".stdin").write_text(given)
        env = {"PATH": os.environ.get("PATH", ""), "HOME": workdir, "PYTHONHASHSEED": "0"}
        settings = (limits.cpu_s, limits.memory_mb * 1024 * 1024, cap)
        flags = (sandbox_boundary.remounts(boundary), inner, len(stdins))
        per_case = (int(limits.timeout_s * 1000), stop_at_failure)
        with (work / ".stdout").open("wb") as out, (work / ".stderr").open("wb") as err:
            process = subprocess.Popen(
                [
                    *sandbox_boundary.command(boundary, workdir),
                    sys.executable,
                    "-I",
                    "-S",
                    "-c",
                    PRELUDE,
                    *(str(int(value)) for value in (*settings, *flags, *per_case)),
                ],
                cwd=workdir,
                env=env,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=err,
                start_new_session=True,  # its own process group: killed whole on timeout
            )
            try:  # each case has its own clock in the server; this one is for the server
                process.communicate(code.encode(), timeout=limits.timeout_s * len(stdins) + 10)
                timed_out = False
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                timed_out = True
        statuses = _statuses(work / ".status")
        results = []
        for index in range(len(stdins)):
            case = work / f"case{index}"
            if index in statuses:
                status = statuses[index]
                results.append(
                    SandboxResult(
                        _head(case / ".stdout", limits.output_bytes),
                        _tail(case / ".stderr", limits.output_bytes),
                        status,
                        timed_out=status is None,
                    )
                )
            elif timed_out or process.returncode != 0:  # the server itself failed
                server_status = None if timed_out else _own_status(process.returncode, boundary)
                stderr = _tail(work / ".stderr", limits.output_bytes)
                results.append(SandboxResult("", stderr, server_status, timed_out))
                break
            else:
                break  # not run: a case before it failed
        return results


def _statuses(path: Path) -> dict[int, int | None]:
    """Each case's exit status as the server wrote it (None: timed out)."""
    if not path.exists():
        return {}
    found: dict[int, int | None] = {}
    for line in path.read_text().splitlines():
        index, status = line.split()
        found[int(index)] = None if status == "timeout" else int(status)
    return found


def _own_status(status: int, boundary: str) -> int:
    """The server's status: bwrap (and the shell under unshare) report a process killed by
    signal N as 128 + N, where Python's convention (the one `SandboxResult.error` reads)
    is -N."""
    if boundary != "guard" and 128 < status < 128 + signal.NSIG:
        return 128 - status
    return status


def _head(path: Path, size: int) -> str:
    with path.open("rb") as handle:
        return handle.read(size).decode(errors="replace")


def _tail(path: Path, size: int) -> str:
    with path.open("rb") as handle:
        handle.seek(max(path.stat().st_size - size, 0))
        return handle.read().decode(errors="replace")
