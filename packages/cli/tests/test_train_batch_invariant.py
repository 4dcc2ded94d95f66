"""True on-policy RL (`rollout.batch_invariant`): the HF rollout engine and the FSDP trainer
run batch-invariant ops, so the log-prob the rollout reports for a sampled token is the
one the trainer computes for it, bit for bit: the importance ratio of the update against
the rollout's log-probs is exactly 1 on every token, and the trainer-vs-rollout
mismatch is exactly 0. Off, both are a few ulps away (the flip changes the run)."""

import pytest

from rl.core.config import load_config
from rl.core.demo import DEMO_CONFIG
from rl.core.trainer import run_training


def _steps(tmp_path, tiny_run, metrics_rows, *overrides):
    config = load_config(
        DEMO_CONFIG,
        [
            *tiny_run,
            "actor.ppo_mini_batch_size=8",  # = data.train_batch_size: one update per step
            "trainer.total_training_steps=2",
            "trainer.test_freq=0",
            f"trainer.output_dir={tmp_path}",
            *overrides,
        ],
    )
    run_training(config)
    return [row for row in metrics_rows(tmp_path) if "timing/update_actor" in row]


@pytest.mark.parametrize(
    "layout",
    [
        # packed rows, each prompt once for its responses, the fused log-prob kernel
        ["actor.use_fused_kernels=true", "actor.use_prefix_grouper=true"],
        ["actor.use_fused_kernels=false", "actor.use_prefix_grouper=false"],  # packed, logits
        ["actor.use_fused_kernels=false", "actor.use_remove_padding=false"],  # padded, logits
    ],
    ids=["shared-prompts-fused", "packed-plain", "padded-plain"],
)
def test_the_update_ratio_against_the_rollouts_logprobs_is_exactly_one(
    tmp_path, tiny_run, metrics_rows, layout
):
    bypass = ["algorithm.rollout_correction.bypass_mode=true", *layout]
    steps = _steps(tmp_path / "on", tiny_run, metrics_rows, "rollout.batch_invariant=true", *bypass)
    assert len(steps) == 2
    for step in steps:  # the old log-probs are the rollout's, the new ones the update's
        assert step["actor/ratio_max"] == step["actor/ratio_min"] == 1.0
        assert step["actor/approx_kl"] == 0.0 and step["actor/pg_clipfrac"] == 0.0
    off = _steps(tmp_path / "off", tiny_run, metrics_rows, *bypass)
    assert any(step["actor/ratio_max"] != step["actor/ratio_min"] for step in off)


def test_the_trainers_old_logprobs_equal_the_rollouts(tmp_path, tiny_run, metrics_rows):
    always = ["actor.old_log_prob_pass=always"]
    steps = _steps(tmp_path / "on", tiny_run, metrics_rows, "rollout.batch_invariant=true", *always)
    for step in steps:
        assert step["mismatch/max_abs_logprob_diff"] == 0.0
        assert step["mismatch/abs_logprob_diff"] == 0.0
    off = _steps(tmp_path / "off", tiny_run, metrics_rows, *always)
    assert any(step["mismatch/max_abs_logprob_diff"] > 0 for step in off)


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("rollout.name=vllm", "rollout.name"),
        ("model.lora_rank=4", "model.lora_rank"),
        ("actor.ulysses_sequence_parallel_size=2", "actor.ulysses_sequence_parallel_size"),
    ],
)
def test_what_it_is_not_built_for_is_refused_by_name(override, key):
    from rl.core.errors import ConfigError

    with pytest.raises(ConfigError, match=key):
        load_config(DEMO_CONFIG, ["rollout.batch_invariant=true", override])
