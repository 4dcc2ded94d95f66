"""Rank processes for the tests' multi-process scenarios, forked from a warm interpreter.

A scenario of the tests (megatron at TP 2, FSDP over gloo, a weight broadcast) runs each
rank as `python SCRIPT ARGS...`: a fresh interpreter that spends 3-7 s importing torch,
transformers and megatron-core before about a second of work. `WarmRanks` starts a server
(this file, run as a script) that imports those modules once, then forks one child per
rank: the child runs SCRIPT as `__main__` with its arguments, environment and working
folder, its stdout and stderr in a file, as `python SCRIPT ARGS...` would, minus the imports.

What a child shares with its server that a fresh interpreter would not: the modules already
imported (with their import-time state) and the OpenMP runtime, which reads its settings
when torch loads. So the server runs with the ranks' OMP_NUM_THREADS, a request asking for
another is refused, and the server never runs a torch op (no thread pool exists to be
forked). Python's and NumPy's global random states are re-seeded in each child.

Protocol (one JSON object a line): the client writes {script, argv, env, cwd, log, status}
on the server's stdin; the server forks and answers {"pid": ...}; when the child ends, the
server writes its exit code (negative: the signal that ended it) to the `status` file.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

# ---- client (the pytest process) -----------------------------------------------------------


class WarmRanks:
    """A server that has imported `preload` (and every module `scripts` import at their top),
    forking rank processes on request. `threads`: the ranks' OMP_NUM_THREADS."""

    def __init__(self, preload: Sequence[str], scripts: Sequence[str] = (), threads: int = 1):
        self.threads = str(threads)
        self.folder = Path(tempfile.mkdtemp(prefix="warm-ranks-"))
        env = {**os.environ, "OMP_NUM_THREADS": self.threads}
        self.server = subprocess.Popen(
            [
                sys.executable,
                __file__,
                json.dumps({"preload": list(preload), "scripts": list(scripts)}),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(self.folder / "server.log", "w"),  # noqa: SIM115 (the server's lifetime)
            text=True,
            env=env,
        )
        self.count = 0

    def run(
        self,
        script: str | os.PathLike[str],
        argvs: Sequence[Sequence[str]],
        env: Mapping[str, str] | None = None,
        timeout: float = 600,
    ) -> list[tuple[int, str]]:
        """Run `python script *argv` for each argv at once (the ranks of one scenario); each
        one's (exit code, output). A rank still running after `timeout` s is killed (-9)."""
        env = {**os.environ, **(env or {})}
        if env.get("OMP_NUM_THREADS", self.threads) != self.threads:
            raise ValueError(
                f"the warm ranks run with OMP_NUM_THREADS={self.threads} (read when torch "
                f"loaded in their server), not {env['OMP_NUM_THREADS']}: start another server"
            )
        env["OMP_NUM_THREADS"] = self.threads
        ranks = []
        for argv in argvs:
            self.count += 1
            log, status = (self.folder / f"{self.count}.{kind}" for kind in ("log", "status"))
            request = {
                "script": str(script),
                "argv": [str(a) for a in argv],
                "env": env,
                "cwd": os.getcwd(),
                "log": str(log),
                "status": str(status),
            }
            ranks.append((self._start(request), log, status))
        deadline = time.monotonic() + timeout
        try:
            while not all(status.exists() for _, _, status in ranks):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.02)
        finally:
            for pid, _, status in ranks:
                if not status.exists():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
            for _, _, status in ranks:  # the server reaps the killed and writes their status
                while not status.exists():
                    self._check_alive()
                    time.sleep(0.01)
        return [
            (int(status.read_text()), log.read_text(errors="replace")) for _, log, status in ranks
        ]

    def _start(self, request: dict) -> int:
        self._check_alive()
        assert self.server.stdin is not None and self.server.stdout is not None
        self.server.stdin.write(json.dumps(request) + "\n")
        self.server.stdin.flush()
        reply = self.server.stdout.readline()
        if not reply:
            self._check_alive()
        return json.loads(reply)["pid"]

    def _check_alive(self) -> None:
        if self.server.poll() is not None:
            log = (self.folder / "server.log").read_text(errors="replace")
            raise RuntimeError(
                f"the warm-ranks server exited ({self.server.returncode}):\n{log[-3000:]}"
            )

    def close(self) -> None:
        if self.server.poll() is None:
            assert self.server.stdin is not None
            self.server.stdin.close()
            try:
                self.server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.server.kill()


# ---- server ----------------------------------------------------------------------------------


def on_a_free_port(launch: Callable[[str], Any], attempts: int = 3) -> Any:
    """`launch(port)` with a fresh free port, and again with another when a process took
    that port between its pick and the ranks' rendezvous (EADDRINUSE in a failed rank's
    output: the other test worker's Ray or vLLM may bind any port meanwhile)."""
    import socket

    for attempt in range(attempts):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = str(sock.getsockname()[1])
        try:
            return launch(port)
        except AssertionError as error:
            if "EADDRINUSE" not in str(error) or attempt == attempts - 1:
                raise
    return None


def top_level_imports(script: str) -> list[str]:
    """The modules `script` imports at its top level (what `python script` loads first)."""
    tree = ast.parse(Path(script).read_text(), script)
    names = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _reap(statuses: dict[int, str]) -> None:
    while True:
        try:
            pid, wait_status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        path = statuses.pop(pid, None)
        if path is not None:
            partial = f"{path}.partial"
            Path(partial).write_text(str(os.waitstatus_to_exitcode(wait_status)))
            os.replace(partial, path)


def _child(request: dict) -> None:
    """Become `python script *argv` (never returns)."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        sys.stdin = open(os.devnull)  # noqa: SIM115
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        import random

        random.seed()
        with contextlib.suppress(ImportError):
            import numpy

            numpy.random.seed()  # noqa: NPY002 (the global state a fresh interpreter seeds)
        script = request["script"]
        sys.argv = [script, *request["argv"]]
        sys.path[0] = os.path.dirname(os.path.abspath(script))
        import runpy

        try:
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
            if not isinstance(stop.code, int | None):
                print(stop.code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def serve(preload: Sequence[str], scripts: Sequence[str]) -> None:
    for script in scripts:
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
        for name in top_level_imports(script):
            with contextlib.suppress(ImportError):
                importlib.import_module(name)
        sys.path.pop(0)
    for name in preload:
        importlib.import_module(name)
    statuses: dict[int, str] = {}
    signal.signal(signal.SIGCHLD, lambda *_: _reap(statuses))
    for line in sys.stdin:
        request = json.loads(line)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})  # no reap before it is known
        pid = os.fork()
        if pid == 0:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
            _child(request)
        statuses[pid] = request["status"]
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        print(json.dumps({"pid": pid}), flush=True)
    # stdin closed: the client is done; wait for what still runs
    while statuses:
        _reap(statuses)
        time.sleep(0.05)


if __name__ == "__main__":
    spec = json.loads(sys.argv[1])
    serve(spec["preload"], spec["scripts"])
