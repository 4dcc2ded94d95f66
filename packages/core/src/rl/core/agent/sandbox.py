"""Run untrusted Python (a model's code) in a subprocess with limits: CPU seconds and
address space (rlimits), a wall-clock timeout after which the whole process group is
killed, a fresh temporary working directory, no network and no writes outside that
directory (a Python audit hook installed before the code runs refuses sockets, new
processes and writes elsewhere), and bounded output. A limit that is hit is a result with
an error, never an exception in the caller.

The audit hook is a guard for honest mistakes and casual escapes in model-written code,
not a security boundary against a determined adversary (that needs an OS sandbox:
containers, seccomp, gVisor); rl keeps the interface so such a runner can replace it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

# Runs in the child before the user's code: the guard, then the code from stdin.
_PRELUDE = r"""
import os, resource, sys

def _install(cpu, memory, output):
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (output, output))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # everything the guard uses is bound here, out of reach of the code it guards
    realpath, fsdecode, pathlike = os.path.realpath, os.fsdecode, os.PathLike
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND
    root = realpath(os.getcwd())
    blocked = ("socket.", "subprocess.", "os.system", "os.exec", "os.posix_spawn", "os.fork",
               "os.spawn", "pty.", "ctypes.", "os.kill", "os.killpg", "signal.pthread_kill")
    changes = ("os.remove", "os.rename", "os.rmdir", "os.mkdir", "shutil.rmtree", "os.chmod",
               "os.chown", "os.symlink", "os.link", "os.truncate")

    def inside(path):
        try:
            target = realpath(fsdecode(path))
        except Exception:
            return False
        return target == root or target.startswith(root + "/")

    def guard(event, args):
        if event.startswith(blocked):
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "open" and len(args) >= 2:
            path, mode = args[0], args[1]
            writing = isinstance(mode, str) and any(c in mode for c in "wax+")
            flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
            writing = writing or bool(flags & write_flags)
            if writing and not isinstance(path, int) and not inside(path):
                raise PermissionError(f"sandbox: writing {path!r} outside the working directory")
        if event in changes:
            paths = [a for a in args if isinstance(a, (str, bytes, pathlike))]
            if any(not inside(p) for p in paths):
                raise PermissionError(f"sandbox: {event} outside the working directory")

    sys.addaudithook(guard)

_install(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
del _install, resource
_code = sys.stdin.read()
sys.stdin = open(".stdin")  # the program's input (empty unless the caller gave one)
exec(compile(_code, "<sandbox>", "exec"), {"__name__": "__main__"})
"""


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


def run_python(code: str, limits: SandboxLimits | None = None, stdin: str = "") -> SandboxResult:
    """Run `code` under `limits` in a fresh temporary directory (removed afterwards), with
    `stdin` as its standard input. Its stdout and stderr go to files there, each capped by
    RLIMIT_FSIZE, so that output cannot fill the caller's memory; the first `output_bytes`
    of stdout and the last of stderr come back."""
    limits = limits or SandboxLimits()
    cap = max(limits.output_bytes * 16, 1 << 20)  # bytes a file (or the output) may reach
    with tempfile.TemporaryDirectory(prefix="rl-sandbox-") as workdir:
        (Path(workdir) / ".stdin").write_text(stdin)
        env = {"PATH": os.environ.get("PATH", ""), "HOME": workdir, "PYTHONHASHSEED": "0"}
        out_path, err_path = Path(workdir) / ".stdout", Path(workdir) / ".stderr"
        with out_path.open("wb") as out, err_path.open("wb") as err:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-I",
                    "-S",
                    "-c",
                    _PRELUDE,
                    str(limits.cpu_s),
                    str(limits.memory_mb * 1024 * 1024),
                    str(cap),
                ],
                cwd=workdir,
                env=env,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=err,
                start_new_session=True,  # its own process group: killed whole on timeout
            )
            try:
                process.communicate(code.encode(), timeout=limits.timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                timed_out = True
        cut = limits.output_bytes
        stdout = _head(out_path, cut)
        stderr = _tail(err_path, cut)
        return SandboxResult(stdout, stderr, None if timed_out else process.returncode, timed_out)


def _head(path: Path, size: int) -> str:
    with path.open("rb") as handle:
        return handle.read(size).decode(errors="replace")


def _tail(path: Path, size: int) -> str:
    with path.open("rb") as handle:
        handle.seek(max(path.stat().st_size - size, 0))
        return handle.read().decode(errors="replace")
