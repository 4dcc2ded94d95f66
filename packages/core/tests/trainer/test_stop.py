"""The graceful stop: a first signal asks, a second aborts, the grace period abandons."""

import os
import signal
import time

import pytest

from rl.core.errors import RunStopped
from rl.core.trainer.stop import stop_on_signals


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_first_signal_asks_the_run_to_stop(sig):
    before = signal.getsignal(sig)
    with stop_on_signals(grace_s=60) as stop:
        assert not stop.requested
        os.kill(os.getpid(), sig)
        time.sleep(0.05)  # the handler runs between bytecodes
        assert stop.requested and stop.signum == sig
        error = stop.stopped("checkpoint at step 3")
        assert error.exit_code == 128 + sig
        assert str(error) == f"stopped by {signal.Signals(sig).name}: checkpoint at step 3"
    assert signal.getsignal(sig) == before  # the caller's handlers are back


def test_a_second_signal_aborts_at_once():
    aborted = pytest.raises(RunStopped, match="second signal aborted")
    with aborted as raised, stop_on_signals(grace_s=60):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # never reached to the end
    assert raised.value.exit_code == 130


def test_a_step_that_outlives_the_grace_period_is_abandoned():
    started = time.monotonic()
    abandoned = pytest.raises(RunStopped, match="did not finish within trainer.stop_grace_s = 0.2s")
    with abandoned, stop_on_signals(grace_s=0.2):
        os.kill(os.getpid(), signal.SIGTERM)
        while time.monotonic() - started < 60:  # a long step
            time.sleep(0.01)
    assert time.monotonic() - started < 60  # abandoned, not run to its end


def test_a_stop_that_a_library_turned_into_its_own_error_is_still_the_stop():
    """The grace period may run out inside code that catches the stop and raises an error
    of its own (torch's zip writer, mid-checkpoint, reports a torn file): the run still
    ends as abandoned, with the signal's exit code."""
    abandoned = pytest.raises(RunStopped, match="did not finish within trainer.stop_grace_s")
    with abandoned as raised, stop_on_signals(grace_s=0.05):
        os.kill(os.getpid(), signal.SIGTERM)
        try:
            time.sleep(5)  # the grace timer fires here
        except RunStopped:
            raise RuntimeError("[enforce fail at inline_container.cc] unexpected pos") from None
    assert raised.value.exit_code == 143
    with pytest.raises(RuntimeError, match="not a stop"), stop_on_signals(grace_s=60):
        raise RuntimeError("not a stop")  # without an abandoned stop, errors stay errors
