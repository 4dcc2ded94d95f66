"""ROLL's shaping keys and its `reinforce` estimator change what a train step learns from:
one tiny step per setting, metrics compared with the same seed and data."""

from __future__ import annotations

import json

import pytest

from rl.core.config import load_config
from rl.core.demo import DEMO_CONFIG
from rl.core.trainer import run_training

SCORER = """
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    return 3.0 * len(solution_str) - 4.0  # spread scores, some beyond any clip bound
"""


def _step(tiny, tmp_path, name, *overrides):
    out = tmp_path / name
    scorer = tmp_path / "scorer.py"
    scorer.write_text(SCORER)
    reward = [f"reward.custom_reward_function.path={scorer}"]
    config = load_config(DEMO_CONFIG, [*tiny, *reward, f"trainer.output_dir={out}", *overrides])
    run_training(config)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return rows[-1]


def test_flipping_each_shaping_key_changes_the_step(one_tiny_step, tmp_path):
    base = _step(one_tiny_step, tmp_path, "base", "algorithm.adv_estimator=reinforce")
    assert "algorithm/advantage_clip_frac" not in base
    runs = {
        "whiten": ("algorithm.whiten_advantages=true",),
        "adv_clip": ("algorithm.advantage_clip=0.01",),
        "reward_clip": ("algorithm.reward_clip=0.01",),
        "whiten_rewards": ("algorithm.whiten_rewards=true",),
    }
    for name, overrides in runs.items():
        row = _step(one_tiny_step, tmp_path, name, "algorithm.adv_estimator=reinforce", *overrides)
        changed = {
            key
            for key in ("advantages/mean", "advantages/max", "actor/pg_loss")
            if key in base and row.get(key) != pytest.approx(base[key], abs=1e-9)
        }
        assert changed, (name, base, row)
        if name == "adv_clip":
            assert row["algorithm/advantage_clip_frac"] > 0
            assert row["advantages/max"] <= 0.01 + 1e-9
        if name == "reward_clip":
            assert "algorithm/reward_clip_frac" in row


def test_reinforce_does_not_train_as_grpo(one_tiny_step, tmp_path):
    reinforce = _step(one_tiny_step, tmp_path, "reinforce", "algorithm.adv_estimator=reinforce")
    grpo = _step(one_tiny_step, tmp_path, "grpo", "algorithm.adv_estimator=grpo")
    assert reinforce["reward/mean"] == pytest.approx(grpo["reward/mean"])  # same rollouts
    assert reinforce["advantages/mean"] != pytest.approx(grpo["advantages/mean"], abs=1e-6)
