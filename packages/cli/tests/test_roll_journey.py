"""A ROLL user's RLVR job as they run it: ROLL's own example configs (verbatim, 8eb27cc2),
shrunk to one CPU with ROLL's own keys (device mappings, batch, lengths, steps, paths), on
data in ROLL's layout (`messages` as a JSON string, `ground_truth`, `tag`) and a real-shape
model folder (2 layers). The FSDP example is qwen3-8B-rlvr_fsdp2, the megatron example
qwen2.5-7B-rlvr_megatron; both train 2 steps with ROLL's REINFORCE, advantage whitening and
both clips as converted. ROLL's per-domain reward workers are refused by name, so the run
names a scorer (rl's own key) and allows `rewards.*`.

The megatron run needs megatron-core's CPU mode (`trainer.device=cpu` with the megatron
strategy, branch megatron-cpu-mode); before it is merged, run this file locally with
packages/megatron-backend/tests/cpu_site on PYTHONPATH."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from rl.core.data.roll_layout import roll_row, write_jsonl

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).parent / "dialects" / "roll" / "upstream" / "examples"
SCORER = """
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    return float(len(set(solution_str)) % 3)  # varies by sample: advantages are not all 0
"""
# ROLL's own keys: one device, 2 steps, tiny batches and lengths, the data files
SHRINK = [
    "num_gpus_per_node=1",
    "actor_train.device_mapping='list(range(0,1))'",
    "actor_infer.device_mapping='list(range(0,1))'",
    "reference.device_mapping='list(range(0,1))'",
    "max_steps=2",
    "save_steps=100",
    "eval_steps=100",
    "rollout_batch_size=2",
    "num_return_sequences_in_group=2",
    "prompt_length=64",
    "response_length=8",
    "actor_train.training_args.per_device_train_batch_size=2",
    "actor_train.training_args.gradient_accumulation_steps=1",
    "actor_train.training_args.warmup_steps=0",
    "actor_train.data_args.file_name=[data/math_deepmath_deal.jsonl]",
    "validation.data_args.file_name=[data/math_benchmarks.jsonl]",
    # one domain (math) instead of five: its rows are the whole batch
    "~actor_train.data_args.domain_interleave_probs",
    "+actor_train.data_args.domain_interleave_probs={math_rule: 1.0}",
    "max_len_mask=false",
    "difficulty_mask=false",
    "actor_train.model_args.dtype=fp32",
    "actor_infer.model_args.dtype=fp32",
    "actor_infer.strategy_args.strategy_name=hf_infer",
    "actor_infer.strategy_args.strategy_config=null",
]


@pytest.fixture
def roll_data(tmp_path):
    """ROLL's RLVR layout, under data/ where the example configs look (relative paths)."""
    rows = [
        roll_row(f"What is {i} + {i + 1}?", str(2 * i + 1), "deepmath_103k", i) for i in range(8)
    ]
    write_jsonl(rows, tmp_path / "data" / "math_deepmath_deal.jsonl")
    write_jsonl(rows[:4], tmp_path / "data" / "math_benchmarks.jsonl")
    (tmp_path / "scorer.py").write_text(SCORER)
    return tmp_path


def run_roll_job(rl_executable, example: Path, model: Path, run: Path, *extra: str):
    command = [
        rl_executable,
        "train",
        "--from",
        "roll",
        str(example),
        f"pretrain={model}",
        f"reward_pretrain={model}",
        f"output_dir={run / 'out'}",
        *SHRINK,
        *extra,
        "trainer.device=cpu",
        "trainer.val_before_train=false",
        f"reward.custom_reward_function.path={run / 'scorer.py'}",
        "--allow-unsupported",
        "rewards.*",
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=1500, cwd=run)


def check_run(out: Path, metrics_rows, strategy: str) -> None:
    steps = [r["step"] for r in metrics_rows(out) if "actor/pg_loss" in r]
    assert steps == [1, 2]
    ours = yaml.safe_load((out / "config.yaml").read_text())
    algorithm = ours["algorithm"]
    assert algorithm["adv_estimator"] == "reinforce"  # ROLL's, not GRPO
    assert algorithm["whiten_advantages"] and algorithm["advantage_clip"] == 2.0
    assert algorithm["reward_clip"] == 10.0
    assert ours["actor"]["strategy"] == strategy and ours["actor"]["clip_ratio_c"] == 1.4
    assert "roll:rewards.math_rule.worker_cls" in ours["trainer"]["dropped_settings"]
    for sample in map(json.loads, (out / "val_generations.jsonl").read_text().splitlines()):
        assert sample["prompt"].startswith("<|im_start|>"), sample["prompt"][:200]
        assert "[{" not in sample["prompt"]  # the JSON string was parsed, not fed as text


def test_rolls_fsdp2_example_trains(tmp_path, roll_data, model_folder, rl_executable, metrics_rows):
    model = model_folder("qwen3-0.6b", num_layers=2, hidden_size=256, intermediate_size=512)
    result = run_roll_job(
        rl_executable,
        EXAMPLES / "qwen3-8B-rlvr_fsdp2" / "rlvr_config.yaml",
        model,
        roll_data,
        "actor_train.strategy_args.strategy_config.fsdp_size=1",
        "actor_train.strategy_args.strategy_config.param_dtype=fp32",
    )
    assert result.returncode == 0, result.stderr[-4000:]
    check_run(roll_data / "out", metrics_rows, "fsdp")


def test_rolls_megatron_example_trains(
    tmp_path, roll_data, model_folder, rl_executable, metrics_rows
):
    model = model_folder("qwen2.5-0.5b", num_layers=2, hidden_size=256, intermediate_size=512)
    result = run_roll_job(
        rl_executable,
        EXAMPLES / "qwen2.5-7B-rlvr_megatron" / "rlvr_config.yaml",
        model,
        roll_data,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    check_run(roll_data / "out", metrics_rows, "megatron")
