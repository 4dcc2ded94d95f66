"""PhaseTimer's `timing/<phase>` metrics and `current_phase()`, the innermost phase open."""

import pytest

from rl.core.trainer.timers import PhaseTimer, current_phase


def test_current_phase_names_the_innermost_open_phase_and_none_between():
    timer = PhaseTimer()
    assert current_phase() is None
    with timer.phase("update_actor"):
        assert current_phase() == "update_actor"
        with PhaseTimer().phase("sync"):  # another timer's phase counts too
            assert current_phase() == "sync"
        assert current_phase() == "update_actor"
    assert current_phase() is None
    with pytest.raises(RuntimeError), timer.phase("generate"):
        raise RuntimeError("a failing phase still closes")
    assert current_phase() is None
    metrics = timer.metrics()
    assert set(metrics) == {"timing/update_actor", "timing/generate", "timing/step"}
    assert metrics["timing/step"] == pytest.approx(
        metrics["timing/update_actor"] + metrics["timing/generate"]
    )
