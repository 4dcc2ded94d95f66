"""The modes benchmark's overlap figure: how much of the shorter phase a step hides."""

import pytest

from rl.bench.modes import PLACEMENTS, overlap


def test_overlap_is_one_at_the_max_of_the_phases_and_zero_at_their_sum():
    assert overlap(2.0, 3.0, 3.0) == pytest.approx(1.0)
    assert overlap(2.0, 3.0, 5.0) == pytest.approx(0.0)
    assert overlap(2.0, 3.0, 4.0) == pytest.approx(0.5)
    assert overlap(2.0, 3.0, 6.0) < 0  # slower than running them one after the other


def test_the_disaggregated_placement_puts_actor_and_rollout_on_workers_apart():
    from rl.core.config import load_config
    from rl.core.workers.launch import ray_layout

    layout = ray_layout(load_config(overrides=PLACEMENTS["disaggregated"]))
    assert layout is not None and layout.disaggregated
    assert (layout.train_ranks, layout.rollout_replicas) == (1, 1)


def test_the_reward_overlap_calibration_counts_the_steps_responses():
    from rl.bench.reward_overlap import WAYS, responses

    row = {"reward/arithmetic/count": 48.0, "reward/other/count": 16.0, "reward/mean": 0.5}
    assert responses(row) == 64.0
    # the ways differ by their overlap switch alone
    assert WAYS == {
        "in_order": ["reward.launch_reward_fn_async=false"],
        "background": ["reward.launch_reward_fn_async=true"],
        "streamed": ["reward.launch_reward_fn_async=false", "reward.stream_chunks=4"],
    }
