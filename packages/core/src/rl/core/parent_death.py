"""A child process that dies with its parent, even when the parent is killed with SIGKILL.

`die_with_parent(parent_pid)` runs first thing in the child (a pool initializer): on Linux
it asks the kernel for SIGKILL when the parent goes (`prctl(PR_SET_PDEATHSIG)`), then checks
that the parent is still the one it was started by (it may have died before the call).
Elsewhere it does nothing.

The kernel sends the signal when the *thread* that started the child ends, not the
process: start such children from a thread that lives as long as the process that owns
them (see `rl.core.rewards.pool.ScoringPool`, which starts its workers from one
long-lived thread).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(parent_pid: int) -> bool:
    """Have this process killed when `parent_pid` (its parent) dies; True when armed."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return False
    if os.getppid() != parent_pid:  # the parent died before the call: nobody will signal
        os.kill(os.getpid(), signal.SIGKILL)
    return True
