"""Reward workers die with the process that owns the pool, even on SIGKILL, and only then."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from rl.core.rewards import RewardManager, RewardRequest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="parent-death signals are Linux-only"
)

REWARD = "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n" + (
    "    return float(solution_str == ground_truth)\n"
)


def alive(pid):
    """True while `pid` runs (a zombie waiting to be reaped counts as gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return fields[0] != "Z"


def wait_gone(pids, timeout_s=30.0):
    """The pids still alive after `timeout_s` (a liveness bound, not a timing assertion)."""
    deadline = time.monotonic() + timeout_s
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [pid for pid in pids if alive(pid)]


def requests(n):
    return [RewardRequest("custom", "yes" if i % 2 else "no", "yes") for i in range(n)]


@pytest.fixture
def reward_file(tmp_path):
    path = tmp_path / "reward.py"
    path.write_text(REWARD)
    return str(path)


@pytest.mark.timeout(120)
def test_workers_started_from_a_thread_that_ended_keep_working(reward_file):
    """The kernel's parent-death signal follows the starting *thread*: a pool first used
    from a short-lived thread must not lose its workers when that thread ends."""
    manager = RewardManager(reward_file, num_workers=2, max_error_rate=1.0)
    try:
        results = []
        thread = threading.Thread(target=lambda: results.append(manager.score(requests(16))))
        thread.start()
        thread.join()
        assert results[0].scores == [0.0, 1.0] * 8 and not any(results[0].errors)
        workers = list(manager.pool.executor._processes.values())
        assert workers, "the pool started no worker"
        time.sleep(1.0)  # a worker killed by its starting thread's end would be dead by now
        assert [w.exitcode for w in workers] == [None] * len(workers)
        again = manager.score(requests(16))
        assert again.scores == [0.0, 1.0] * 8 and not any(again.errors)
        assert manager.pool.executor._processes.keys() == {w.pid for w in workers}
    finally:
        manager.close()


OWNER = textwrap.dedent("""
    import sys, threading
    from rl.core.rewards import RewardManager, RewardRequest
    manager = RewardManager(sys.argv[1], num_workers=2, max_error_rate=1.0)
    requests = [RewardRequest("custom", "yes", "yes")] * 16
    thread = threading.Thread(target=manager.score, args=(requests,))
    thread.start()
    thread.join()
    assert manager.score(requests).scores == [1.0] * 16
    print(*manager.pool.executor._processes, flush=True)
    sys.stdin.read()  # until killed
""")


@pytest.mark.timeout(120)
def test_workers_die_when_their_owner_is_killed_with_sigkill(reward_file):
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, reward_file],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = owner.stdout.readline()
        workers = [int(pid) for pid in line.split()]
        assert workers and all(alive(pid) for pid in workers), line
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(timeout=30)
        assert wait_gone(workers) == [], "reward workers outlived their killed owner"
    finally:
        owner.kill()
        owner.wait(timeout=30)
