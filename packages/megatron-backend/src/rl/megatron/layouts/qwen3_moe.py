"""Qwen3-MoE <-> megatron-core GPT with MoE layers: Qwen3 attention, a router and experts.

HF names are the checkpoint's (what vLLM and SGLang load): one
`mlp.experts.{e}.{gate,up,down}_proj.weight` per expert — not the fused
`experts.gate_up_proj` that transformers>=5 builds in memory. megatron keeps
the experts as `SequentialMLP` (`mlp.experts.local_experts.{e}.linear_fc1.weight`)
or, with `grouped_experts`, as `TEGroupedMLP` (`mlp.experts.linear_fc1.weight{e}`).
MoE layers keep `pre_mlp_layernorm` separate in both specs. Qwen3-MoE has no
shared expert, so the table has none.
"""

from __future__ import annotations

from typing import Any

from .dims import config_value
from .errors import LayoutError
from .fuse import GATE_UP
from .llama import attention_rules, embedding_rules
from .table import Rule
from .tp import TPKind

L = "decoder.layers.{layer}."
H = "model.layers.{layer}."


def moe_rules(*, grouped_experts: bool) -> tuple[Rule, ...]:
    """Pre-MLP norm, router (replicated over TP) and each expert's fc1 (gate/up) and fc2."""
    e = H + "mlp.experts.{expert}."
    if grouped_experts:
        fc1, fc2 = (
            L + "mlp.experts.linear_fc1.weight{expert}",
            L + "mlp.experts.linear_fc2.weight{expert}",
        )
    else:
        local = L + "mlp.experts.local_experts.{expert}."
        fc1, fc2 = local + "linear_fc1.weight", local + "linear_fc2.weight"
    return (
        Rule(
            L + "pre_mlp_layernorm.weight", (H + "post_attention_layernorm.weight",), (("hidden",),)
        ),
        Rule(L + "mlp.router.weight", (H + "mlp.gate.weight",), (("experts", "hidden"),)),
        Rule(
            fc1,
            (e + "gate_proj.weight", e + "up_proj.weight"),
            (("moe_ffn", "hidden"), ("moe_ffn", "hidden")),
            GATE_UP,
            TPKind.GATE_UP,
        ),
        Rule(fc2, (e + "down_proj.weight",), (("hidden", "moe_ffn"),), tp=TPKind.ROW),
    )


def rules(
    hf_config: Any, *, spec: str = "local", grouped_experts: bool = False
) -> tuple[Rule, ...]:
    """The Qwen3-MoE table; every layer must be an MoE layer (the released models are)."""
    dense_layers = config_value(hf_config, "mlp_only_layers", [])
    sparse_step = int(config_value(hf_config, "decoder_sparse_step", 1))
    if dense_layers or sparse_step != 1:
        raise LayoutError(
            "qwen3_moe layouts support only all-MoE models; this config has "
            f"mlp_only_layers={list(dense_layers)} and decoder_sparse_step={sparse_step}"
        )
    bias = bool(config_value(hf_config, "attention_bias", False))
    return (
        *embedding_rules(),
        *attention_rules(spec, qkv_bias=bias, proj_bias=bias, qk_norm=True),
        *moe_rules(grouped_experts=grouped_experts),
    )
