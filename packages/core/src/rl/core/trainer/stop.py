"""A graceful stop on SIGTERM and SIGINT: what Slurm, Kubernetes and Ray send first, and Ctrl-C.

The first signal asks the run to stop: the step in progress finishes, a checkpoint of it
is written, the loggers are flushed, and the run ends with `RunStopped` (exit code 128 +
the signal number: 143 for SIGTERM, 130 for SIGINT). Running again with the same command
resumes from that checkpoint.

`trainer.stop_grace_s` bounds the wait: a step (and its checkpoint) that has not finished
that long after the signal is abandoned (its partial update is never saved; the last
checkpoint stays the resume point) and the run ends with the same exit code. Set it below
your scheduler's kill delay (Slurm's KillWait, Kubernetes' terminationGracePeriodSeconds),
or ask the scheduler for the signal earlier (`sbatch --signal=TERM@300`).

A second signal aborts at once (nothing more is written; the last checkpoint stays).
Signals are handled in the driver only; workers (Ray actors, reward workers) are told by
the driver, through the normal calls, and end with it.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from rl.core.errors import RunStopped

log = logging.getLogger(__name__)
SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequest:
    """Whether (and by which signal) the run was asked to stop."""

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self.signum: int | None = None
        self.abandoned = ""  # why, once the grace period ran out

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else "no signal"

    def stopped(self, message: str) -> RunStopped:
        assert self.signum is not None
        return RunStopped(f"stopped by {self.name}: {message}", self.signum)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:  # the second signal: abort now
            signal.setitimer(signal.ITIMER_REAL, 0)
            self.signum = signum
            raise self.stopped("a second signal aborted the run; the last checkpoint is kept")
        self.signum = signum
        log.warning(
            "%s received: finishing this step, then a checkpoint, then stopping (within "
            "trainer.stop_grace_s = %gs; a second signal aborts now)",
            self.name,
            self.grace_s,
        )
        signal.signal(signal.SIGALRM, self._on_grace_over)
        signal.setitimer(signal.ITIMER_REAL, self.grace_s)

    def _on_grace_over(self, signum: int, frame: FrameType | None) -> None:
        self.abandoned = (
            f"the step in progress did not finish within trainer.stop_grace_s = "
            f"{self.grace_s:g}s and was abandoned; the last checkpoint is kept"
        )
        raise self.stopped(self.abandoned)


@contextmanager
def stop_on_signals(grace_s: float) -> Iterator[StopRequest]:
    """SIGTERM and SIGINT handled as a stop request for the body (in the main thread; in
    another thread, where Python cannot take signals, nothing is installed)."""
    request = StopRequest(grace_s)
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = {sig: signal.signal(sig, request._on_signal) for sig in SIGNALS}
    previous_alarm = signal.getsignal(signal.SIGALRM)
    try:
        yield request
    except BaseException as error:
        # the grace period ran out inside code that turned the stop into an error of its
        # own (torch's zip writer, mid-checkpoint, reports a torn file): it is the stop
        if request.abandoned and not isinstance(error, RunStopped):
            raise request.stopped(request.abandoned) from error
        raise
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        signal.signal(signal.SIGALRM, previous_alarm)
