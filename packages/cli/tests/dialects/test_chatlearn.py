"""The ChatLearn importer on ChatLearn-dialect files written for these tests
(`chatlearn/`): OmegaConf loading with dotlist overrides applied before interpolations
resolve, interpolations of keys only ChatLearn's dataclass defines, the schema switch on
train_backend, numbers PyYAML reads as strings, responses-to-prompts batch units, the
legacy v1.0 format refused by name, and validation against our schema."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rl.cli.dialects import convert, detect
from rl.core.config import ConfigError, config_from_mapping

HERE = Path(__file__).parent / "chatlearn"


def unexplained(report):
    return [
        e.source for e in report.entries if e.status in ("unsupported", "ignored") and not e.reason
    ]


def test_an_fsdp_grpo_file_maps_with_batches_in_prompts():
    conversion = convert("chatlearn", HERE / "grpo_fsdp.yaml")
    config = config_from_mapping(conversion.config, "converted")
    # batches: ChatLearn's responses / n = our prompts
    assert (config.data.train_batch_size, config.rollout.n) == (512 // 8, 8)
    assert config.actor.ppo_mini_batch_size == 256 // 8
    assert config.actor.ppo_micro_batch_size_per_gpu == 8
    # 2e-6 is a string to PyYAML; ChatLearn's loader (OmegaConf) reads the float
    raw = yaml.safe_load((HERE / "grpo_fsdp.yaml").read_text())
    assert raw["models"]["policy_trainer"]["optimizer"]["lr"] == "2e-6"
    assert config.actor.optim.lr == 2e-6
    # ChatLearn's defaults and fixed choices, unlike ours
    assert config.actor.optim.betas == (0.9, 0.95) and config.actor.optim.weight_decay == 0.01
    assert config.model.dtype == "bfloat16" and config.model.trust_remote_code
    assert config.actor.fsdp_config.mixed_precision.param_dtype == "bfloat16"
    assert (config.actor.clip_ratio_high, config.actor.clip_ratio_low) == (0.28, 0.2)
    assert config.rollout.val_kwargs.temperature == 0.6 and config.rollout.val_kwargs.top_k == 20
    assert config.actor.fsdp_config.param_offload and config.actor.fsdp_config.optimizer_offload
    assert config.model.path == "/models/Qwen3-8B"  # policy and ref interpolate the trainer's
    assert config.data.train_files == ("/data/gsm8k/train.json", "/data/math/train.json")
    assert config.cluster.colocation == (["policy", "policy_trainer", "ref_policy"],)
    assert config.trainer.logger == ("console", "jsonl", "wandb")
    assert config.trainer.project_name == "chatlearn-grpo" and config.trainer.test_freq == 5
    assert config.rollout.tensor_parallel_size == 2 and config.reward.num_workers == 2
    assert not unexplained(conversion.report)


def test_a_megatron_file_resolves_keys_only_the_dataclass_defines():
    conversion = convert("chatlearn", HERE / "grpo_megatron.yaml")
    config = config_from_mapping(conversion.config, "converted")
    assert config.rollout.n == 32  # ${runtime_args.num_inference_per_prompt}: its default
    # ${models.policy_trainer.seq_length}: prompt + response length, computed as ChatLearn does
    assert config.actor.ppo_max_token_len_per_gpu == 2048 + 1024
    assert config.ref.log_prob_max_token_len_per_gpu == 2048 + 1024
    assert config.actor.strategy == "megatron" and config.actor.policy_loss == "gspo"
    assert config.actor.megatron.tensor_model_parallel_size == 2
    assert config.actor.megatron.pipeline_model_parallel_size == 2
    assert config.actor.megatron.dist_checkpointing_path == "/ckpt/qwen3-mcore"
    assert config.model.path == "/models/Qwen3-8B"
    # ChatLearn's megatron loss back-propagates the policy loss alone: kl_coef does not train
    assert not config.actor.use_kl_loss
    assert config.actor.optim.min_lr_ratio == pytest.approx(0.1)
    assert config.trainer.logger == ("console", "jsonl", "tensorboard")
    assert (config.data.train_batch_size, config.actor.ppo_mini_batch_size) == (32, 16)
    assert not unexplained(conversion.report)


def test_overrides_are_a_dotlist_applied_before_interpolations_resolve():
    conversion = convert(
        "chatlearn",
        HERE / "grpo_fsdp.yaml",
        [
            "runtime_args.output_dir=/elsewhere",
            "models.policy_trainer.load=/models/other",
            "models.policy.num_inference_per_prompt=16",
            "models.policy_trainer.optimizer.lr='3e-6'",  # quoted: a string, coerced
        ],
    )
    config = config_from_mapping(conversion.config, "converted")
    assert config.trainer.output_dir == "/elsewhere"
    assert config.model.path == "/models/other"  # the policy's ${...load} follows
    assert (config.rollout.n, config.data.train_batch_size) == (16, 512 // 16)
    assert config.actor.optim.lr == 3e-6
    assert any(
        note.startswith("models.policy_trainer.optimizer.lr: a number written as text")
        for note in conversion.report.notes
    )
    with pytest.raises(ConfigError, match=r"plain key=value overrides"):
        convert("chatlearn", HERE / "grpo_fsdp.yaml", ["+runtime_args.debug=true"])


def test_chatlearn_batch_rules_are_checked():
    with pytest.raises(
        ConfigError, match=r"sample_per_episode / train_global_batch_size = 512 / 384"
    ):
        convert("chatlearn", HERE / "grpo_fsdp.yaml", ["runtime_args.train_global_batch_size=384"])
    with pytest.raises(ConfigError, match="models.policy.num_inference_per_prompt = 512 / 5"):
        convert("chatlearn", HERE / "grpo_fsdp.yaml", ["models.policy.num_inference_per_prompt=5"])


def test_the_legacy_format_is_recognised_and_refused_with_what_to_do():
    assert detect(HERE / "legacy_v1.yaml") == "chatlearn"
    with pytest.raises(ConfigError, match=r"legacy v1.0 format \(top-level runtime, runtime_env"):
        convert("chatlearn", HERE / "legacy_v1.yaml")


def test_chatlearn_files_are_detected():
    assert detect(HERE / "grpo_fsdp.yaml") == "chatlearn"
    assert detect(HERE / "grpo_megatron.yaml") == "chatlearn"


def test_an_agent_config_brings_its_turn_budgets():
    conversion = convert("chatlearn", HERE / "agent_math.yaml")
    config = config_from_mapping(conversion.config, "converted")
    assert config.rollout.multi_turn.max_assistant_turns == 3
    assert config.rollout.multi_turn.max_total_tokens == 3000
    assert all(entry.status == "mapped" for entry in conversion.report.entries)
    assert any("a ChatLearn agent config" in note for note in conversion.report.notes)


def test_models_outside_the_colocation_group_get_devices_of_their_own():
    """ChatLearn places a colocation group on its largest model's num_gpu devices and each
    model outside every group on num_gpu devices of its own (its ModelManager): the trainer
    and reference on 0-1, the vLLM policy on 2-3, 4 devices in all."""
    from rl.core.workers.launch import cluster_placement

    conversion = convert(
        "chatlearn",
        HERE / "grpo_fsdp.yaml",
        [
            "runtime_args.colocation=[policy_trainer,ref_policy]",
            "models.policy_trainer.num_gpu=2",  # the reference's interpolates it
            "models.policy.num_gpu=2",
        ],
    )
    config = config_from_mapping(conversion.config, "converted")
    assert config.cluster.placement == {"actor": [0, 1], "ref": [0, 1], "rollout": [2, 3]}
    assert not config.cluster.colocation
    assert (config.cluster.nnodes, config.cluster.n_gpus_per_node) == (1, 4)
    placement = cluster_placement(config)
    assert placement.colocation == (("actor", "ref"),)
    assert not unexplained(conversion.report)
