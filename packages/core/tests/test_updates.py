"""The train-step skeleton both train engines share (`rl.core.updates`)."""

import pytest

from rl.core.updates import mini_batch_updates, role_means


def test_role_means_prefix_unnamed_metrics_and_keep_named_ones():
    values = {"entropy": [1.0, 3.0], "actor/pg_loss": [0.5], "critic/vf_loss": [2.0, 4.0]}
    assert role_means(values, "actor") == {
        "actor/entropy": 2.0,
        "actor/pg_loss": 0.5,
        "critic/vf_loss": 3.0,
    }
    assert role_means({}, "critic") == {}


def updates(skipped: list[float]):
    """Runs `mini_batch_updates` over one mini-batch per entry of `skipped`; the calls it
    made, in order, and its result."""
    calls: list[str] = []

    def step(mini: int) -> dict[str, float]:
        calls.append(f"step {mini}")
        return {
            "critic/loss": float(mini),
            "critic/skipped_steps": skipped[mini],
            "critic/grad_norm": 10.0 * mini,
        }

    def lr() -> float:
        calls.append("lr")
        return 0.1

    def weight_norm() -> float:
        calls.append("weight_norm")
        return 7.0

    result = mini_batch_updates(
        range(len(skipped)), step, "critic", lr, lambda: calls.append("schedule"), weight_norm
    )
    return calls, result


def test_steps_then_lr_then_the_schedule_then_the_weight_norm_metrics_averaged():
    calls, result = updates([0.0, 1.0, 0.0])
    assert calls == ["step 0", "step 1", "step 2", "lr", "schedule", "weight_norm"]
    assert result == {
        "critic/loss": 1.0,
        "critic/skipped_steps": pytest.approx(1 / 3),
        "critic/grad_norm": 10.0,
        "lr": 0.1,
        "critic/weight_norm": 7.0,
    }


def test_the_schedule_stays_when_every_step_was_skipped():
    calls, result = updates([1.0, 1.0])
    assert "schedule" not in calls
    assert result["critic/skipped_steps"] == 1.0
