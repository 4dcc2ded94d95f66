"""`converter_for(hf_config)`: the layout converter for a model, chosen by `model_type`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import llama, qwen2, qwen3, qwen3_moe
from .converter import LayoutConverter
from .dims import ModelDims, config_value
from .errors import LayoutError
from .table import LayoutTable, Rule

RulesFn = Callable[..., tuple[Rule, ...]]

ARCHITECTURES: dict[str, RulesFn] = {
    "llama": llama.rules,
    "mistral": llama.rules,
    "qwen2": qwen2.rules,
    "qwen3": qwen3.rules,
    "qwen3_moe": qwen3_moe.rules,
}


def supported_model_types() -> tuple[str, ...]:
    """The HF `model_type` values `converter_for` knows, sorted."""
    return tuple(sorted(ARCHITECTURES))


def converter_for(
    hf_config: Any,
    *,
    spec: str = "local",
    grouped_experts: bool = False,
    emit_tied_lm_head: bool = False,
) -> LayoutConverter:
    """The HF <-> megatron-core converter for `hf_config` (a `PretrainedConfig` or its dict).

    spec: `"local"` or `"te"`, the megatron layer spec (where the norms live).
    grouped_experts: MoE experts as `TEGroupedMLP` (`linear_fc1.weight{e}`)
        instead of `SequentialMLP` (`local_experts.{e}.linear_fc1.weight`).
    emit_tied_lm_head: with `tie_word_embeddings`, also export `lm_head.weight`
        (see `LayoutConverter`).
    """
    model_type = config_value(hf_config, "model_type")
    if model_type not in ARCHITECTURES:
        raise LayoutError(
            f"no weight layout for model_type {model_type!r}; supported: {', '.join(supported_model_types())}"
        )
    if spec not in llama.SPECS:
        raise LayoutError(f"unknown megatron layer spec {spec!r}; expected one of {llama.SPECS}")
    rules = ARCHITECTURES[model_type](hf_config, spec=spec, grouped_experts=grouped_experts)
    return LayoutConverter(
        LayoutTable(model_type, rules),
        ModelDims.from_hf_config(hf_config),
        tie_word_embeddings=bool(config_value(hf_config, "tie_word_embeddings", False)),
        emit_tied_lm_head=emit_tied_lm_head,
    )
