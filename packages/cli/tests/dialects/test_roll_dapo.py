"""ROLL's query filter (rewards.<domain>.query_filter_config: its rollout loop drops a
prompt's group by its responses' rewards and draws more prompts until the batch is full)
converts to rl's dynamic sampling where they mean the same, and is refused by name where
they do not."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl.cli.dialects import convert
from rl.core.config import config_from_mapping

BASE = """
pretrain: /models/Qwen2.5-0.5B
rollout_batch_size: 4
num_return_sequences_in_group: 2
prompt_length: 64
response_length: 64
adv_estimator: grpo
actor_train:
  training_args: {per_device_train_batch_size: 2, gradient_accumulation_steps: 1}
  data_args: {template: qwen2_5, file_name: [data/train.jsonl], messages: messages}
  strategy_args: {strategy_name: fsdp2_train}
actor_infer:
  strategy_args: {strategy_name: hf_infer}
rewards:
  math_rule:
    query_filter_config:
      type: std_filter
      filter_args: {std_threshold: 0}
"""


@pytest.fixture
def file(tmp_path: Path) -> Path:
    path = tmp_path / "rlvr_config.yaml"
    path.write_text(BASE)
    return path


def run(file: Path, *overrides: str):
    conversion = convert("roll", file, list(overrides))
    by_key = {e.source: e for e in conversion.report.entries}
    return config_from_mapping(conversion.config, "converted"), by_key


TYPE = "rewards.math_rule.query_filter_config.type"


def test_std_filter_at_zero_is_dynamic_sampling(file):
    config, by_key = run(file)
    filtering = config.algorithm.filter_groups
    assert (filtering.enable, filtering.metric, filtering.max_num_gen_batches) == (
        True,
        "seq_reward",
        0,  # ROLL draws until the batch is full, without a cap
    )
    assert config.data.gen_batch_size is None  # ROLL draws rollout_batch_size at a time
    assert by_key[TYPE].status == "mapped"
    assert by_key["rewards.math_rule.query_filter_config.filter_args.std_threshold"].status == (
        "ignored"
    )


@pytest.mark.parametrize(
    "overrides",
    [
        ["rewards.math_rule.query_filter_config.type=no_filter"],
        ["rewards.math_rule.query_filter_config.filter_args.std_threshold=-1"],  # drops none
    ],
)
def test_a_filter_that_drops_nothing_is_off(file, overrides):
    config, by_key = run(file, *overrides)
    assert not config.algorithm.filter_groups.enable
    assert by_key[TYPE].status == "default"


@pytest.mark.parametrize(
    ("overrides", "why"),
    [
        (["rewards.math_rule.query_filter_config.type=mean_filter"], "mean_filter"),
        (["rewards.math_rule.query_filter_config.filter_args.std_threshold=0.1"], "0.1"),
        (
            [
                "+rewards.code.query_filter_config.type=std_filter",
                "+rewards.code.query_filter_config.filter_args.std_threshold=0.5",
            ],
            "differs by domain",
        ),
    ],
)
def test_a_filter_rl_does_not_have_is_refused_by_name(file, overrides, why):
    _, by_key = run(file, *overrides)
    assert by_key[TYPE].status == "unsupported" and why in by_key[TYPE].reason
