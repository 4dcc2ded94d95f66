"""Qwen2 <-> megatron-core GPT: Llama's table plus the q/k/v biases (`add_qkv_bias`)."""

from __future__ import annotations

from typing import Any

from .llama import attention_rules, dense_mlp_rules, embedding_rules
from .table import Rule


def rules(
    hf_config: Any, *, spec: str = "local", grouped_experts: bool = False
) -> tuple[Rule, ...]:
    """The Qwen2 table: biases on q, k and v only (not on o_proj or the MLP)."""
    return (*embedding_rules(), *attention_rules(spec, qkv_bias=True), *dense_mlp_rules(spec))
