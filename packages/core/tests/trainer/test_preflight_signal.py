"""Greedy sampling with several responses per prompt under a group estimator learns
nothing (every group is identical): preflight warns, naming the keys."""

import logging

import pytest

from rl.core.config import load_config
from rl.core.trainer.preflight import preflight
from rl.core.trainer.preflight_signal import greedy_group_warning


def test_preflight_warns_on_greedy_groups(caplog):
    config = load_config(overrides=["rollout.temperature=0", "rollout.n=4"])
    with caplog.at_level(logging.WARNING):
        preflight(config)
    (record,) = [r for r in caplog.records if "rollout.temperature = 0" in r.getMessage()]
    message = record.getMessage()
    assert "rollout.n = 4" in message and "algorithm.adv_estimator = grpo" in message
    assert "do_sample" in message and "\n" not in message


@pytest.mark.parametrize(
    "overrides",
    [
        ["algorithm.adv_estimator=rloo", "rollout.temperature=0"],
        ["algorithm.adv_estimator=reinforce_plus_plus_baseline", "rollout.top_k=1"],
        ["algorithm.norm_adv_by_std_in_grpo=false", "rollout.temperature=0"],  # Dr.GRPO
    ],
)
def test_each_group_estimator_is_covered(overrides):
    assert greedy_group_warning(load_config(overrides=overrides))


@pytest.mark.parametrize(
    "overrides",
    [
        [],  # sampling at temperature 1
        ["rollout.temperature=0", "rollout.n=1"],  # one response: nothing to compare
        ["rollout.temperature=0", "algorithm.adv_estimator=gae"],  # a critic's baseline
    ],
)
def test_configs_that_can_learn_are_not_warned_about(overrides):
    assert greedy_group_warning(load_config(overrides=overrides)) is None
