"""`reward.launch_reward_fn_async` (verl's key): the step scores in the background while the
old / reference log-probs are computed, and trains exactly what the in-order step trains;
the scoring it hid is `timing/reward_background`, the wait left `timing/reward`."""

from __future__ import annotations

import json

import pytest

from rl.core.config import ConfigError, load_config
from rl.core.demo import DEMO_CONFIG
from rl.core.trainer import run_training

SLOW = """
import time

def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    time.sleep(0.05)
    return float(len(solution_str) % 3)
"""
TIMES = ("timing/", "perf/", "time")


def _run(tiny, tmp_path, name, *overrides):
    scorer = tmp_path / "slow.py"
    scorer.write_text(SLOW)
    out = tmp_path / name
    config = load_config(
        DEMO_CONFIG,
        [
            *tiny,
            f"reward.custom_reward_function.path={scorer}",
            "reward.num_workers=1",
            "actor.use_kl_loss=true",  # a reference pass to overlap with too
            "trainer.total_training_steps=2",
            f"trainer.output_dir={out}",
            *overrides,
        ],
    )
    run_training(config)
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_background_scoring_trains_what_in_order_scoring_trains(one_tiny_step, tmp_path):
    in_order = _run(one_tiny_step, tmp_path, "in_order")
    overlapped = _run(one_tiny_step, tmp_path, "async", "reward.launch_reward_fn_async=true")
    for plain, background in zip(in_order, overlapped, strict=True):
        compared = [key for key in plain if not key.startswith(TIMES)]
        assert compared and set(compared) <= set(background)
        for key in compared:
            assert background[key] == pytest.approx(plain[key], rel=1e-6, abs=1e-9), key
    trained = [row for row in overlapped if "actor/pg_loss" in row]
    assert trained and all(row["timing/reward_background"] >= 8 * 0.05 for row in trained)
    # what was hidden behind the log-prob passes is not waited for again
    assert all(row["timing/reward"] < row["timing/reward_background"] for row in trained)
    assert all("timing/reward_background" not in row for row in in_order)


def test_it_needs_the_pool_and_something_to_overlap():
    with pytest.raises(
        ConfigError, match=r"reward.num_workers = 0 is not allowed: >= 1 with reward"
    ):
        load_config(None, ["reward.launch_reward_fn_async=true"])
    with pytest.raises(ConfigError, match=r"false with algorithm.filter_groups.enable"):
        load_config(
            None,
            [
                "reward.launch_reward_fn_async=true",
                "reward.num_workers=1",
                "algorithm.filter_groups.enable=true",
                "algorithm.filter_groups.metric=acc",
                "reward.reward_manager=dapo",
            ],
        )
