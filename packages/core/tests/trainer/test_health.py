"""Training health from step metrics: a stuck run stops, an exploding one is warned about."""

import logging
import math
import random

import pytest

from rl.core.errors import TrainingError
from rl.core.trainer.health import IDENTICAL_REWARD_STEPS, TrainingHealth


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
        for step in (2, 3, 4, 5):
            assert health.check(step_metrics(grad=1.2), step) == []
        spike = health.check(step_metrics(grad=500.0), 6)[0]
        assert "gradient norm 500 is over 10x the median 1.2" in spike
        assert "weight norm 1e+06 is over 10x" in health.check(step_metrics(weight=1e6), 7)[0]
        assert "pg_loss is inf" in health.check(step_metrics(loss=math.inf), 8)[0]
    assert "step 7: actor weight norm" in caplog.text


def realistic_grad_norms(steps, seed=0):
    """A healthy run's gradient norms: log-normal around a slow decay, with zeros where an
    update was skipped or a batch's advantages were all 0 (every group's rewards equal)."""
    rng = random.Random(seed)
    norms = []
    for step in range(steps):
        if rng.random() < 0.4:
            norms.append(0.0)
        else:
            norms.append(0.8 * (1 + step) ** -0.3 * math.exp(rng.gauss(0, 0.5)))
    return norms


def test_no_spike_warning_on_a_healthy_run_with_zero_grad_norms():
    """The old baseline (median of all norms) was 0 here and warned on most steps."""
    for seed in range(5):
        health = TrainingHealth(max_skipped_steps=10)
        for step, grad in enumerate(realistic_grad_norms(300, seed), start=1):
            assert health.check(step_metrics(grad=grad), step) == [], (seed, step, grad)


def test_a_real_spike_is_warned_about_once_among_zeros():
    health = TrainingHealth(max_skipped_steps=10)
    norms = realistic_grad_norms(120)
    norms[100] = 40.0  # ~100x the typical norm
    warned = [
        step
        for step, grad in enumerate(norms, start=1)
        if health.check(step_metrics(grad=grad), step)
    ]
    assert warned == [101]


def test_identical_rewards_for_k_steps_warn_once_naming_the_step(caplog):
    health = TrainingHealth(max_skipped_steps=10)
    k = IDENTICAL_REWARD_STEPS

    def flat(step, share=1.0):
        return health.check({**step_metrics(), "reward/zero_std_group_frac": share}, step)

    for step in range(1, k):
        assert flat(step) == []
    assert flat(k, share=0.5) == []  # one group with a spread resets the count
    for step in range(k + 1, 2 * k):
        assert flat(step) == []
    with caplog.at_level(logging.WARNING):
        (warning,) = flat(2 * k)
    assert warning.startswith(f"step {2 * k}: every prompt group's rewards were identical")
    assert "reward.*" in warning and "rollout.temperature" in warning
    assert warning in caplog.text
    assert all(flat(step) == [] for step in range(2 * k + 1, 4 * k))  # once per run
