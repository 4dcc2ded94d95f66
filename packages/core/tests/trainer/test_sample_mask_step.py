"""ROLL's sample masks in a whole step: the ratios are logged, the step's response metrics
count every response, and a step whose responses are all masked skips its updates (as
ROLL skips it: `mask/final_mask_sum_eq_0`)."""

from __future__ import annotations

import json

from rl.core.config import load_config
from rl.core.demo import DEMO_CONFIG
from rl.core.trainer import run_training


def _run(tiny, out, *overrides):
    config = load_config(
        DEMO_CONFIG, [*tiny, "sft.steps=0", f"trainer.output_dir={out}", *overrides]
    )
    run_training(config)
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_a_step_with_every_response_masked_skips_its_updates(one_tiny_step, tmp_path):
    # random weights never answer right: every group's accuracy is 0, at the low bound
    rows = _run(one_tiny_step, tmp_path / "masked", "algorithm.difficulty_mask=true")
    (row,) = [r for r in rows if "actor/difficulty_mask_ratio" in r]
    assert row["actor/difficulty_mask_ratio"] == 0.0 and row["mask/final_mask_sum_eq_0"] == 1.0
    assert "actor/pg_loss" not in row and row["response/length_mean"] > 0
    plain = _run(one_tiny_step, tmp_path / "plain")
    assert "actor/pg_loss" in plain[-1] and "mask/final_mask_sum_eq_0" not in plain[-1]
    assert plain[-1]["response/length_mean"] == row["response/length_mean"]  # same rollouts
