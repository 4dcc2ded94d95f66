"""Bad layouts are refused before any process group starts, naming the key."""

from __future__ import annotations

from dataclasses import replace

import pytest
from transformers import AutoConfig

from rl.core.config import ConfigError
from rl.megatron.config import MegatronConfig
from rl.megatron.parallel import check_layout, fit_world

pytestmark = pytest.mark.megatron

QWEN2 = dict(
    hidden_size=64,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=128,
    vocab_size=96,
)


def config(model_type="qwen2", **overrides):
    extra = {"num_experts": 4, "num_experts_per_tok": 2} if model_type == "qwen3_moe" else {}
    return AutoConfig.for_model(model_type, **{**QWEN2, **extra, **overrides})


@pytest.mark.parametrize(
    ("hf", "layout", "world", "words"),
    [
        (config(), {"tensor_model_parallel_size": 3}, 3, "num_attention_heads (4)"),
        (
            config(num_key_value_heads=1),
            {"tensor_model_parallel_size": 2},
            2,
            "num_key_value_heads",
        ),
        (config(vocab_size=97), {"tensor_model_parallel_size": 2}, 2, "vocabulary (97 tokens)"),
        (config(), {"pipeline_model_parallel_size": 3}, 3, "do not divide the model's 4 layers"),
        (config(), {"tensor_model_parallel_size": 2}, 3, "does not divide the world of 3"),
        (config(), {"expert_model_parallel_size": 2}, 2, "the model has no experts"),
        (
            config("qwen3_moe"),
            {"expert_model_parallel_size": 3},
            3,
            "does not divide the model's 4 experts",
        ),
        (config("gpt2"), {}, 1, "'gpt2' model, which the megatron engine does not support"),
        (
            config(),
            {"pipeline_model_parallel_size": 2, "virtual_pipeline_model_parallel_size": 2},
            2,
            "virtual_pipeline_model_parallel_size",
        ),
        (
            config(),
            {"use_dist_checkpointing": True, "dist_checkpointing_path": "/x"},
            1,
            "is not a megatron checkpoint (no dist/ inside)",
        ),
    ],
    ids=[
        "tp-heads",
        "tp-kv-heads",
        "tp-vocab",
        "pp-layers",
        "world",
        "ep-dense",
        "ep-experts",
        "architecture",
        "vpp",
        "dist-checkpoint-start",
    ],
)
def test_bad_layouts_name_the_key(hf, layout, world, words):
    with pytest.raises(ConfigError, match="actor.megatron|model.path") as error:
        check_layout(hf, MegatronConfig(**layout), world, "actor")
    assert words in str(error.value)


def test_uneven_first_and_last_stages_are_checked():
    layout = MegatronConfig(
        pipeline_model_parallel_size=2,
        override_transformer_config={"num_layers_in_first_pipeline_stage": 3},
    )
    check_layout(config(), layout, 2)  # 3 + 1 layers: fine
    bad = MegatronConfig(
        pipeline_model_parallel_size=3,
        override_transformer_config={"num_layers_in_first_pipeline_stage": 3},
    )
    with pytest.raises(ConfigError, match="leave 1 of 4 layers for 2 middle stages"):
        check_layout(config(), bad, 3)


def shrunk(layout: MegatronConfig, overrides: dict) -> MegatronConfig:
    """`layout` with `fit_world`'s overrides (keys under "actor.megatron.") applied."""
    sizes, transformer = {}, dict(layout.override_transformer_config)
    for key, value in overrides.items():
        name = key.removeprefix("actor.megatron.")
        if name.startswith("override_transformer_config."):
            transformer[name.partition(".")[2]] = value
        else:
            sizes[name] = value
    return replace(layout, **sizes, override_transformer_config=transformer)


@pytest.mark.parametrize(
    ("hf", "layout", "world", "expected"),
    [
        (config(), {"tensor_model_parallel_size": 2}, 4, {}),
        (
            config(num_hidden_layers=12),
            {
                "tensor_model_parallel_size": 2,
                "pipeline_model_parallel_size": 4,
                "virtual_pipeline_model_parallel_size": 3,
            },
            4,
            {
                "pipeline_model_parallel_size": 2,
                "virtual_pipeline_model_parallel_size": None,
            },
        ),
        (
            config(),
            {"tensor_model_parallel_size": 2, "context_parallel_size": 2},
            1,
            {"tensor_model_parallel_size": 1, "context_parallel_size": 1},
        ),
        (
            config(),
            {
                "pipeline_model_parallel_size": 2,
                "override_transformer_config": {"num_layers_in_first_pipeline_stage": 3},
            },
            1,
            {
                "pipeline_model_parallel_size": 1,
                "override_transformer_config.num_layers_in_first_pipeline_stage": None,
            },
        ),
        (
            config("qwen3_moe"),
            {"tensor_model_parallel_size": 2, "expert_model_parallel_size": 4},
            2,
            {"expert_model_parallel_size": 1},
        ),
        (
            config("qwen3_moe"),
            {"expert_model_parallel_size": 4, "expert_tensor_parallel_size": 2},
            2,
            {"expert_model_parallel_size": 1},
        ),
    ],
)
def test_a_layout_shrinks_to_one_the_smaller_world_runs(hf, layout, world, expected):
    """What preflight prints when a run gets fewer devices than it asked for: each size at
    its largest divisor that fits, and the shrunk layout passes the checks."""
    layout = MegatronConfig(**layout)
    overrides = fit_world(layout, world, "actor.megatron")
    assert overrides == {f"actor.megatron.{key}": value for key, value in expected.items()}
    check_layout(hf, shrunk(layout, overrides), world, "actor")


def test_shared_prompts_are_refused_before_anything_starts():
    """`use_prefix_grouper` is rl-fsdp's: asked for with megatron, preflight names the key."""
    from rl.core.config import load_config
    from rl.core.workers.build import role_spec
    from rl.megatron.engine import MegatronTrainEngine

    config = load_config(overrides=["actor.strategy=megatron", "actor.use_prefix_grouper=true"])
    with pytest.raises(ConfigError, match=r"actor.use_prefix_grouper = true is not supported"):
        MegatronTrainEngine.preflight(role_spec(config, "actor"), 1)
    auto = load_config(overrides=["actor.strategy=megatron"])
    MegatronTrainEngine.preflight(role_spec(auto, "actor"), 1)  # null: nothing refused


@pytest.mark.parametrize("key", ["param_offload", "grad_offload", "optimizer_offload"])
def test_overlapping_modes_refuse_megatrons_offload_keys_by_name(key):
    """`Offloading.offload_keys`: the megatron engine names its own keys (trainer/modes.py
    knows no backend)."""
    from rl.core.config import ConfigError, load_config
    from rl.core.trainer import modes

    config = load_config(
        overrides=[
            "actor.strategy=megatron",
            f"actor.megatron.{key}=true",
            "trainer.mode=one_step_off",
        ]
    )
    with pytest.raises(
        ConfigError, match=rf"^actor.megatron.{key} with trainer.mode: one_step_off"
    ):
        modes.check(config)
    modes.check(load_config(overrides=["actor.strategy=megatron", "trainer.mode=one_step_off"]))
