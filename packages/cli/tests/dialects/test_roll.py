"""The ROLL importer on ROLL-dialect files written for these tests (`roll/`): Hydra
composition with a `../config/fragment@_here_` default and a whole-node interpolation,
ROLL's dataclass defaults, per-role strategies (mixed backends), `device_mapping`
expressions parsed without eval, the batch arithmetic, the report, and validation against
our schema."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rl.cli.dialects import convert, detect
from rl.core.config import ConfigError, config_from_mapping

HERE = Path(__file__).parent / "roll" / "rlvr"


def entries(report):
    return {entry.source: entry for entry in report.entries}


def unexplained(report):
    return [
        e.source for e in report.entries if e.status in ("unsupported", "ignored") and not e.reason
    ]


def test_a_megatron_rlvr_file_maps_role_by_role():
    conversion = convert("roll", HERE / "rlvr_megatron.yaml")
    ours, by_key = conversion.config, entries(conversion.report)
    config = config_from_mapping(ours, "converted")  # validates against our schema
    # the fragment, pulled in whole by ${megatron_tp2}, configures the megatron actor
    assert config.actor.strategy == "megatron"
    assert config.actor.megatron.tensor_model_parallel_size == 2
    assert config.actor.megatron.override_transformer_config == {
        "recompute_granularity": "full",
        "recompute_method": "uniform",  # mcore_adapter's default for full recompute
        "recompute_num_layers": 1,
        "moe_token_dispatcher_type": "alltoall",
    }
    assert config.actor.megatron.sequence_parallel is False  # ROLL's default, not ours
    # batches: ROLL's responses per dp rank -> our prompts: 2 × 16 × dp (8 / TP 2) / 8
    assert config.actor.ppo_mini_batch_size == 2 * 16 * 4 // 8
    assert config.actor.ppo_micro_batch_size_per_gpu == 2
    assert (config.data.train_batch_size, config.rollout.n) == (64, 8)
    # 1e-6 is a string to PyYAML (YAML 1.1); Hydra reads it as the float ROLL means
    raw = yaml.safe_load((HERE / "rlvr_megatron.yaml").read_text())
    assert raw["actor_train"]["training_args"]["learning_rate"] == "1e-6"
    assert config.actor.optim.lr == 1e-6 and config.actor.kl_loss_coef == 0.01
    assert config.actor.clip_ratio_c == pytest.approx(1.4)  # dual clip: 1 + 2 · pg_clip
    assert config.trainer.experiment_name == "qwen2.5-7B-rlvr-ppo"  # ${pg_variant}
    assert config.trainer.logger == ("console", "jsonl", "wandb")
    assert config.model.path == "/models/Qwen2.5-7B"  # pretrain fills the policy roles
    assert config.rollout.name == "vllm" and config.rollout.engine_kwargs == {
        "vllm": {"block_size": 16}
    }
    assert config.rollout.val_kwargs.temperature == 0.6
    assert config.cluster.placement == {
        "actor": list(range(8)),
        "rollout": list(range(6)),
        "ref": list(range(8)),
    }
    assert by_key["rewards.math_rule.tag_included"].status == "mapped"
    assert by_key["actor_train.data_args.domain_interleave_probs.math_rule"].status == "mapped"
    assert "megatron_tp2.tensor_model_parallel_size" not in by_key  # an interpolated variable
    assert any(
        "megatron_tp2: a node the file only interpolates" in n for n in conversion.report.notes
    )
    assert not unexplained(conversion.report)


def test_roll_defaults_apply_where_the_file_is_silent_and_backends_mix_per_role():
    # ROLL's GAE is unwhitened unless whiten_advantages (its default: false); rl's gae whitens
    plain = entries(convert("roll", HERE / "rlvr_fsdp2_gae.yaml").report)["adv_estimator"]
    assert plain.status == "unsupported" and "whiten_advantages" in plain.reason
    conversion = convert("roll", HERE / "rlvr_fsdp2_gae.yaml", ["+whiten_advantages=true"])
    config = config_from_mapping(conversion.config, "converted")
    # ROLL's dataclass defaults, unlike ours
    assert config.actor.optim.lr_scheduler == "linear"
    assert config.actor.loss_agg_mode == "seq-mean-token-mean"
    assert (config.rollout.top_p, config.rollout.top_k, config.rollout.temperature) == (
        0.7,
        50,
        0.95,
    )
    assert config.algorithm.kl_ctrl.kl_coef == 0.2 and config.actor.kl_loss_coef == 0.0
    assert config.model.dtype == "bfloat16" and config.model.gradient_checkpointing
    assert config.actor.clip_ratio_c is None  # dual_clip_loss false: no dual clip
    # FSDP2 actor with Ulysses 2 (dp 2), megatron critic with TP 2 (dp 2), SGLang rollout
    assert config.actor.strategy == "fsdp" and config.critic.strategy == "megatron"
    assert config.actor.fsdp_config.fsdp_size == 4
    assert config.actor.fsdp_config.mixed_precision.param_dtype == "bfloat16"
    assert config.actor.ppo_mini_batch_size == 4 * 2 * 2 // 4
    assert config.critic.ppo_mini_batch_size == 4 * 4 * 2 // 4
    assert config.critic.megatron.tensor_model_parallel_size == 2
    assert config.rollout.name == "sglang" and config.rollout.gpu_memory_utilization == 0.7
    assert config.algorithm.adv_estimator == "gae" and config.uses_critic
    assert (config.trainer.resume_mode, config.trainer.resume_from_path) == (
        "path",
        "/runs/ppo-fsdp2/checkpoint-20",
    )
    assert config.trainer.logger == ("console", "jsonl")  # stdout
    assert not unexplained(conversion.report)


def test_roll_overrides_use_hydra_syntax():
    conversion = convert(
        "roll",
        HERE / "rlvr_fsdp2_gae.yaml",
        ["rollout_batch_size=32", "+actor_train.training_args.warmup_steps=5"],
    )
    config = config_from_mapping(conversion.config, "converted")
    assert config.data.train_batch_size == 32 and config.actor.optim.lr_warmup_steps == 5


def test_the_batch_rule_roll_documents_is_checked():
    with pytest.raises(ConfigError, match=r"6 × 4 is not a multiple of .* = 16"):
        convert("roll", HERE / "bad_batch.yaml")
    # a batch that is a whole number of optimizer steps but not of prompt groups
    with pytest.raises(ConfigError, match="not a whole number of prompts"):
        convert(
            "roll",
            HERE / "bad_batch.yaml",
            [
                "rollout_batch_size=8",
                "actor_train.training_args.gradient_accumulation_steps=1",
                "num_return_sequences_in_group=3",
            ],
        )


def test_a_device_mapping_is_parsed_never_evaluated():
    with pytest.raises(ConfigError, match=r"actor_train.device_mapping = .* is not allowed"):
        convert("roll", HERE / "bad_device_mapping.yaml")


def test_actor_infer_needs_an_inference_strategy():
    with pytest.raises(
        ConfigError, match="actor_infer.strategy_args.strategy_name = 'fsdp2_train'"
    ):
        convert(
            "roll",
            HERE / "rlvr_fsdp2_gae.yaml",
            ["actor_infer.strategy_args.strategy_name=fsdp2_train"],
        )


def test_roll_files_are_detected():
    assert detect(HERE / "rlvr_megatron.yaml") == "roll"
    assert detect(HERE / "rlvr_fsdp2_gae.yaml") == "roll"


def test_an_agentic_file_brings_its_turn_budgets_and_names_what_it_leaves():
    conversion = convert(
        "roll", Path(__file__).parent / "roll" / "agentic" / "agentic_sokoban.yaml"
    )
    config = config_from_mapping(conversion.config, "converted")
    by_key = entries(conversion.report)
    assert config.rollout.multi_turn.max_tokens_per_turn == 64
    assert config.rollout.multi_turn.max_assistant_turns == 5
    for key in ("custom_envs.SimpleSokoban.env_type", "train_env_manager.num_env_groups"):
        assert by_key[key].status == "unsupported"
        assert "rollout.multi_turn.environment" in by_key[key].reason
    assert "set rollout.n to it" in by_key["train_env_manager.group_size"].reason
    assert not unexplained(conversion.report)


def test_the_adam_epsilon_of_roll_s_training_args_is_our_eps():
    """ROLL's training_args are Hugging Face's: adam_epsilon (default 1e-8) is Adam's eps."""
    plain = config_from_mapping(convert("roll", HERE / "rlvr_megatron.yaml").config, "plain")
    assert plain.actor.optim.eps == 1e-8
    conversion = convert(
        "roll", HERE / "rlvr_megatron.yaml", ["+actor_train.training_args.adam_epsilon=1e-6"]
    )
    assert not any("adam_epsilon" in entry.source for entry in conversion.report.refused())
    assert config_from_mapping(conversion.config, "eps").actor.optim.eps == 1e-6


def test_rolls_image_pixel_bounds_map_from_actor_train(tmp_path):
    raw = yaml.safe_load((HERE / "rlvr_megatron.yaml").read_text())
    raw["actor_train"]["data_args"].update(image_max_pixels=1048576, image_min_pixels=3136)
    raw["actor_infer"].setdefault("data_args", {})["image_max_pixels"] = 1048576
    (tmp_path / "config").mkdir()
    for fragment in (HERE.parent / "config").glob("*.yaml"):
        (tmp_path / "config" / fragment.name).write_text(fragment.read_text())
    (tmp_path / "rlvr").mkdir()
    path = tmp_path / "rlvr" / "vl.yaml"
    path.write_text(yaml.safe_dump(raw))
    conversion = convert("roll", path)
    config = config_from_mapping(conversion.config, "converted")
    assert (config.data.image_max_pixels, config.data.image_min_pixels) == (1048576, 3136)
    by_key = entries(conversion.report)
    assert by_key["actor_train.data_args.image_max_pixels"].status == "mapped"
    assert by_key["actor_infer.data_args.image_max_pixels"].status == "ignored"
