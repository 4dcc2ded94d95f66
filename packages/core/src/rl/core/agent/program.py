"""An agent program, run once per sample against its session's endpoint.

A program is a command (any language) or a Python function. A command gets the task row
as JSON on its standard input, the endpoint as `OPENAI_BASE_URL` and a key as
`OPENAI_API_KEY`; the last non-empty line of its standard output is its outcome: a JSON
object with `reward` (its own score) and/or `answer`, or else the line itself is the answer
(scored by the run's reward). A function is called as `fn(task, base_url, api_key)` and
returns the same (a text, or a dict with `reward` / `answer`).

A command runs in a fresh work folder (in the sandbox also its HOME and TMPDIR: the one
place it may write), in its own process group, inside the sandbox's OS boundary where one
works (`bwrap`, `unshare`: `rl.core.agent.sandbox`'s; no network but the endpoint, relayed
onto its loopback from the endpoint's Unix socket by `rl.core.agent.loopback_relay`), or
with no boundary when `sandbox: none` is asked for. A program that exits with an error,
prints no outcome, runs past its `timeout_s` (its whole process group killed) or raises
is a failed sample with the reason; it never stops the run. A function cannot be killed:
past its time it is abandoned on its thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

OK, CRASHED, TIMED_OUT = "ok", "crashed", "timed_out"
_TAIL = 400  # characters of a failing program's error output kept in its reason


@dataclass
class Outcome:
    status: str  # OK | CRASHED | TIMED_OUT
    answer: str | None = None
    reward: float | None = None
    error: str = ""  # why it failed

    @property
    def ok(self) -> bool:
        return self.status == OK


def read_outcome(output: Any) -> Outcome:
    """A program's outcome from its last output line, or a function's return value."""
    if isinstance(output, str):
        lines = [line for line in output.splitlines() if line.strip()]
        if not lines:
            return Outcome(CRASHED, error="printed no outcome (its last output line)")
        output = lines[-1].strip()
        with contextlib.suppress(json.JSONDecodeError):
            parsed = json.loads(output)
            if isinstance(parsed, dict):
                output = parsed
    if isinstance(output, Mapping):
        reward, answer = output.get("reward"), output.get("answer")
        if reward is None and answer is None:
            return Outcome(CRASHED, error="its outcome object has neither reward nor answer")
        try:
            value = None if reward is None else float(reward)
        except (TypeError, ValueError):
            return Outcome(CRASHED, error=f"its reward {reward!r} is not a number")
        return Outcome(OK, None if answer is None else str(answer), value)
    if isinstance(output, str):
        return Outcome(OK, output)
    return Outcome(CRASHED, error=f"returned {type(output).__name__}, not a text or a dict")


@dataclass(frozen=True)
class Sandbox:
    """Where commands run: `boundary` (bwrap, unshare, none) and the endpoint's Unix
    socket, the sandbox's one way out."""

    boundary: str
    unix_path: str = ""


async def run_command(
    command: list[str],
    task: Any,
    base_url: str,
    sandbox: Sandbox,
    timeout_s: float,
    api_key: str = "rl-session",
) -> Outcome:
    from rl.core.agent.sandbox_boundary import command as boundary_command

    with tempfile.TemporaryDirectory(prefix="rl-agent-") as workdir:
        env = {**os.environ, "OPENAI_API_KEY": api_key, "OPENAI_BASE_URL": base_url}
        words = list(command)
        if sandbox.boundary != "none":  # its folder is the one place it may write
            env.update(TMPDIR=workdir, HOME=workdir)
            path = "/" + base_url.split("/", 3)[3]  # the session's path on the endpoint
            relay = [sys.executable, "-m", "rl.core.agent.loopback_relay"]
            words = [
                *boundary_command(sandbox.boundary, workdir),
                *relay,
                sandbox.unix_path,
                path,
                "--",
                *words,
            ]
        try:
            process = await asyncio.create_subprocess_exec(
                *words,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=workdir,
                env=env,
                start_new_session=True,  # its own process group, killed as one
            )
        except OSError as error:
            return Outcome(CRASHED, error=f"cannot start {shlex.join(command)}: {error}")
        try:
            stdout, stderr = await asyncio.wait_for(
                process.communicate(json.dumps(task, default=str).encode()), timeout_s
            )
        except TimeoutError:
            _kill_group(process.pid)
            await process.wait()
            return Outcome(TIMED_OUT, error=f"ran past its {timeout_s:g} s (agent.timeout_s)")
        finally:
            if process.returncode is None:
                _kill_group(process.pid)
    if process.returncode != 0:
        tail = stderr.decode(errors="replace").strip()[-_TAIL:]
        return Outcome(CRASHED, error=f"exited with status {process.returncode}: {tail}")
    return read_outcome(stdout.decode(errors="replace"))


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def run_function(
    fn: Callable[..., Any], task: Any, base_url: str, timeout_s: float, api_key: str = "rl-session"
) -> Outcome:
    from rl.core.agent.loop import in_daemon_thread

    try:
        output = await asyncio.wait_for(in_daemon_thread(fn, task, base_url, api_key), timeout_s)
    except TimeoutError:
        return Outcome(TIMED_OUT, error=f"ran past its {timeout_s:g} s (agent.timeout_s)")
    except Exception as error:
        return Outcome(CRASHED, error=f"raised {type(error).__name__}: {error}"[:_TAIL])
    return read_outcome(output)
