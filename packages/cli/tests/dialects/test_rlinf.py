"""The RLinf importer on RLinf-dialect files written for these tests (`rlinf/`): Hydra
composition (an `override hydra/...` entry, a `../hybrid_engines/fsdp@actor.fsdp_config`
fragment under the file's own values), RLinf's custom resolvers, a Jinja string left as
data, component placement, the derived batch sizes, the report, and validation against
our schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl.cli.dialects import convert, detect
from rl.core.config import ConfigError, config_from_mapping

HERE = Path(__file__).parent / "rlinf" / "math"


def entries(report):
    return {entry.source: entry for entry in report.entries}


def unexplained(report):
    return [
        e.source for e in report.entries if e.status in ("unsupported", "ignored") and not e.reason
    ]


def test_a_megatron_grpo_file_resolves_with_rlinfs_resolvers():
    conversion = convert("rlinf", HERE / "grpo_megatron.yaml", ["+cluster.num_gpus_per_node=8"])
    config = config_from_mapping(conversion.config, "converted")
    by_key = entries(conversion.report)
    # ${int_div:${multiply:64, 8}, 8} and ${subtract:seq_length, max_prompt_length}
    assert config.data.train_batch_size == 64
    assert config.data.max_response_length == 4096 - 1024
    assert by_key["rollout.return_logprobs"].value is False  # ${not:True}
    assert by_key["actor.model.params_dtype"].value == "bfloat16"  # ${torch.dtype:bfloat16}
    # the Jinja chat template is data: left as it is
    assert by_key["rollout.custom_chat_template"].value.startswith("{%- for message in messages")
    # RLinf's optimizer batch: 64 × 8 / 4 = 128 sequences = 16 prompts of ours
    assert config.actor.ppo_mini_batch_size == 64 // 4 and config.rollout.n == 8
    assert config.actor.strategy == "megatron"
    assert config.actor.megatron.tensor_model_parallel_size == 2
    assert config.actor.megatron.param_offload and config.actor.megatron.grad_offload
    assert config.actor.megatron.override_transformer_config["recompute_granularity"] == "full"
    assert config.actor.clip_ratio_c is None  # RLinf's null: no dual clip
    assert config.actor.clip_ratio_high == 0.28 and config.actor.entropy_coeff == 0.001
    assert config.actor.use_kl_loss and config.actor.kl_loss_type == "low_var_kl"
    assert config.actor.optim.betas == (0.9, 0.95) and config.actor.optim.min_lr_ratio == 0.0
    assert config.rollout.top_k == -1  # RLinf's 1000000: off
    assert (config.rollout.name, config.rollout.tensor_parallel_size) == ("sglang", 2)
    assert config.model.dtype == "bfloat16" and config.data.chat_template == "auto"
    assert config.cluster.component_placement == {"actor,rollout,reward": "all"}
    assert (config.cluster.nnodes, config.cluster.n_gpus_per_node) == (2, 8)
    assert config.trainer.output_dir == "../results/grpo-1.5b"
    assert config.trainer.logger == ("console", "jsonl", "tensorboard", "wandb")
    assert config.trainer.total_training_steps is None and config.trainer.total_epochs == 5
    assert not unexplained(conversion.report)


def test_an_fsdp_file_takes_its_fragment_and_disaggregated_placement():
    conversion = convert("rlinf", HERE / "grpo_fsdp_disaggregated.yaml")
    config = config_from_mapping(conversion.config, "converted")
    # the fragment at actor.fsdp_config, the file's own value over it
    assert config.actor.fsdp_config.reshard_after_forward is False
    assert config.actor.fsdp_config.mixed_precision.param_dtype == "bfloat16"
    assert config.model.gradient_checkpointing  # from the fragment
    assert config.actor.strategy == "fsdp"
    assert config.actor.fsdp_config.param_offload and config.actor.fsdp_config.optimizer_offload
    # reinpp's baseline with a KL return-to-go is not rl's reinforce_plus_plus_baseline
    refused = {e.source: e.reason for e in conversion.report.refused()}
    assert "KL as a return-to-go" in refused["algorithm.adv_type"]
    assert not config.actor.use_kl_loss
    assert config.actor.tis_cap == 2.0  # importance_sampling_fix with its clip
    assert config.rollout.temperature == 0.0  # do_sample: false
    assert config.rollout.load_format == "auto"  # validate_weight
    assert config.actor.optim.lr_scheduler == "cosine" and config.actor.optim.min_lr_ratio == 0.1
    assert config.actor.optim.lr_warmup_steps == 0 and config.actor.optim.lr_warmup_ratio == 0.05
    assert config.cluster.component_placement["inference"] == "4-5"
    assert config.trainer.logger == ("console", "jsonl", "swanlab")
    assert config.trainer.resume_mode == "auto" and config.trainer.total_training_steps == 20
    assert not unexplained(conversion.report)


def test_only_the_reasoning_runner_converts():
    assert detect(HERE / "embodied.yaml") == "rlinf"
    with pytest.raises(ConfigError, match="runner.task_type = 'embodied'"):
        convert("rlinf", HERE / "embodied.yaml")


def test_rlinfs_batch_rules_are_checked():
    with pytest.raises(ConfigError, match="not divisible by algorithm.n_minibatches = 3"):
        convert("rlinf", HERE / "grpo_fsdp_disaggregated.yaml", ["algorithm.n_minibatches=3"])
    with pytest.raises(ConfigError, match="runner.seq_length = 512 must exceed"):
        convert("rlinf", HERE / "grpo_fsdp_disaggregated.yaml", ["runner.seq_length=512"])


def test_rlinf_files_are_detected():
    assert detect(HERE / "grpo_megatron.yaml") == "rlinf"
    assert detect(HERE / "grpo_fsdp_disaggregated.yaml") == "rlinf"


def test_reinforce_plus_plus_takes_its_kl_in_the_reward():
    conversion = convert(
        "rlinf",
        HERE / "grpo_fsdp_disaggregated.yaml",
        # one mini-batch: this disaggregated FSDP actor would whiten each one apart
        [
            "algorithm.use_reinpp_baseline=false",
            "+algorithm.normalize_advantages=true",
            "algorithm.n_minibatches=1",
        ],
    )
    config = config_from_mapping(conversion.config, "converted")
    assert not conversion.report.refused()
    assert config.algorithm.adv_estimator == "reinforce_plus_plus"
    assert config.algorithm.use_kl_in_reward and config.algorithm.kl_ctrl.kl_coef == 0.001
    # without the KL, the baseline variant is ours
    conversion = convert(
        "rlinf", HERE / "grpo_fsdp_disaggregated.yaml", ["algorithm.reinpp_kl_beta=0"]
    )
    config = config_from_mapping(conversion.config, "converted")
    assert config.algorithm.adv_estimator == "reinforce_plus_plus_baseline"


def test_a_reinforce_plus_plus_kl_is_not_read_by_other_estimators():
    conversion = convert(
        "rlinf", HERE / "grpo_fsdp_disaggregated.yaml", ["algorithm.adv_type=grpo"]
    )
    config = config_from_mapping(conversion.config, "converted")
    assert config.algorithm.adv_estimator == "grpo" and not config.algorithm.use_kl_in_reward
