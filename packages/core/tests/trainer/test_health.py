"""Training health from step metrics: a stuck run stops, an exploding one is warned about."""

import logging
import math

import pytest

from rl.core.errors import TrainingError
from rl.core.trainer.health import TrainingHealth


def step_metrics(grad=1.0, skipped=0.0, weight=10.0, loss=0.1):
    return {
        "actor/grad_norm": grad,
        "actor/skipped_steps": skipped,
        "actor/weight_norm": weight,
        "actor/pg_loss": loss,
    }


def test_consecutive_fully_skipped_steps_stop_the_run():
    health = TrainingHealth(max_skipped_steps=3)
    nan = math.nan
    health.check(step_metrics(grad=nan, skipped=1.0, loss=nan), 1)
    health.check(step_metrics(grad=nan, skipped=1.0, loss=nan), 2)
    health.check(step_metrics(), 3)  # a real update resets the count
    health.check(step_metrics(grad=nan, skipped=1.0), 4)
    health.check(step_metrics(grad=nan, skipped=1.0), 5)
    with pytest.raises(TrainingError, match="step 6: 3 steps in a row skipped every actor update"):
        health.check(step_metrics(grad=nan, skipped=1.0), 6)


def test_a_partly_skipped_step_is_progress():
    health = TrainingHealth(max_skipped_steps=1)
    health.check(step_metrics(skipped=0.5), 1)  # one of two mini-batches updated


def test_explosions_are_warned_about(caplog):
    health = TrainingHealth(max_skipped_steps=10)
    with caplog.at_level(logging.WARNING):
        assert health.check(step_metrics(), 1) == []
        for step in (2, 3):
            assert health.check(step_metrics(grad=1.2), step) == []
        assert "gradient norm 500 is over 100x" in health.check(step_metrics(grad=500.0), 4)[0]
        assert "weight norm 1e+06 is over 10x" in health.check(step_metrics(weight=1e6), 5)[0]
        assert "pg_loss is inf" in health.check(step_metrics(loss=math.inf), 6)[0]
    assert "step 5: actor weight norm" in caplog.text
