"""Guards around the user's reward function: a per-response alarm, and exits turned into errors.

Both work the same in the trainer's own process (`reward.num_workers: 0`) and in a pool worker.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn


# BaseException, like SystemExit: a reward function's own `except Exception:` (common around
# answer parsing) must not swallow its timeout or its exit and return a score as if all went well.
class SampleTimeout(BaseException):
    """The response took longer than `reward.timeout_s`."""


class ExitCalled(BaseException):
    """The reward function called os._exit(code)."""

    def __init__(self, code: Any) -> None:
        super().__init__(code)
        self.code = code


def alarm_possible() -> bool:
    """SIGALRM can interrupt the reward function: POSIX, and this is the main thread (Python
    runs signal handlers only there, and only the main thread may install one)."""
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def _on_alarm(signum: int, frame: Any) -> None:
    raise SampleTimeout


@contextmanager
def alarm_handler(enabled: bool) -> Iterator[None]:
    """While inside, SIGALRM raises SampleTimeout; the previous handler is restored after."""
    if not enabled:
        yield
        return
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextmanager
def alarm(seconds: float) -> Iterator[None]:
    """Raise SampleTimeout in the body after `seconds` (inside `alarm_handler(True)`; 0: none)."""
    if seconds <= 0:
        yield
        return
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


@contextmanager
def exits_trapped() -> Iterator[None]:
    """While inside, os._exit(code) raises ExitCalled instead of ending the process.

    os._exit ends the process on the spot, skipping every `except` and `finally`: called by a
    reward function it would end the trainer (or a pool worker) with no message. So it is
    replaced while the user's code runs, and restored after, since multiprocessing relies on
    the real one. A child forked inside the reward function still exits for real.
    sys.exit needs no trap: it raises SystemExit, which the caller catches.
    """
    real_exit, owner = os._exit, os.getpid()

    def trapped(status: int) -> NoReturn:
        if os.getpid() != owner:
            real_exit(status)
        raise ExitCalled(status)

    os._exit = trapped
    try:
        yield
    finally:
        os._exit = real_exit
