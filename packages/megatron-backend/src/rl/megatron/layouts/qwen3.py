"""Qwen3 <-> megatron-core GPT: Llama's table plus per-head q/k RMSNorm (`qk_layernorm`), no qkv bias."""

from __future__ import annotations

from typing import Any

from .dims import config_value
from .llama import attention_rules, dense_mlp_rules, embedding_rules
from .table import Rule


def rules(
    hf_config: Any, *, spec: str = "local", grouped_experts: bool = False
) -> tuple[Rule, ...]:
    """The Qwen3 table: `q_norm`/`k_norm` -> `q_layernorm`/`k_layernorm`; biases if `attention_bias`."""
    bias = bool(config_value(hf_config, "attention_bias", False))
    return (
        *embedding_rules(),
        *attention_rules(spec, qkv_bias=bias, proj_bias=bias, qk_norm=True),
        *dense_mlp_rules(spec),
    )
