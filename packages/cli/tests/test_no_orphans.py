"""Nothing a run starts outlives it: a real `rl train` killed with SIGKILL (no handler runs,
no cleanup) leaves no process behind (issue 33). Linux: the children ask for a parent-death
signal."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="parent-death signals are Linux-only"
)


def _stat(pid):
    """(state, ppid) of `pid`, None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return fields[0], int(fields[1])


def alive(pid):
    """True while `pid` runs (a zombie waiting to be reaped counts as gone)."""
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"


def descendants(root):
    """The pids below `root`, with their command lines."""
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(entry.name)) is not None:
            children.setdefault(stat[1], []).append(int(entry.name))
    found, todo = {}, list(children.get(root, []))
    while todo:
        pid = todo.pop()
        try:
            found[pid] = (Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")).decode()
        except (FileNotFoundError, ProcessLookupError):
            continue
        todo += children.get(pid, [])
    return found


def wait_for(condition, process, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (value := condition()) is not None:
            return value
        if process.poll() is not None:
            pytest.fail(f"the run ended before {what}: {process.stderr.read()[-3000:]}")
        time.sleep(0.2)
    pytest.fail(f"no {what} within {timeout_s:g} s")


def reward_workers(pid):
    found = descendants(pid)
    workers = [p for p, cmd in found.items() if "multiprocessing.spawn" in cmd]
    return found if len(workers) >= 2 else None


@pytest.mark.timeout(420)
def test_a_killed_run_leaves_no_reward_worker_behind(tmp_path, rl_executable, tiny_run):
    run = subprocess.Popen(
        [
            rl_executable,
            "train",
            *tiny_run,
            "trainer.total_training_steps=500",  # still running when it is killed
            "reward.num_workers=2",
            f"trainer.output_dir={tmp_path / 'out'}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        started = wait_for(lambda: reward_workers(run.pid), run, 300, "two reward workers")
        os.kill(run.pid, signal.SIGKILL)
        run.wait(timeout=30)
        deadline = time.monotonic() + 30  # liveness bound; they go within a second
        while any(alive(pid) for pid in started) and time.monotonic() < deadline:
            time.sleep(0.1)
        survivors = {pid: cmd for pid, cmd in started.items() if alive(pid)}
        assert survivors == {}, f"outlived the killed run: {survivors}"
    finally:
        run.kill()
        run.wait(timeout=30)
