"""Causal core attention for megatron-core's local layer spec, packed (THD) or padded.

The local spec's `DotProductAttention` refuses packed sequences (only TransformerEngine's
attention takes `PackedSeqParams`) and builds an [s, s] score matrix per row. This module
takes its place in the local spec: with THD `packed_seq_params` it attends within each
packed sequence through `rl.kernels.varlen_attention` (flash-attn's varlen kernel on GPU
when installed, bucketed SDPA otherwise); without, causal SDPA over the rows, which are
left-aligned (padding only at the end, never seen by a real token). Dropout is not
supported (RL fine-tuning runs without it); a non-zero `attention_dropout` is an error.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from megatron.core.transformer.module import MegatronModule
from rl.kernels.varlen_attention import varlen_attention


class CausalCoreAttention(MegatronModule):
    """Drop-in for the local spec's `core_attention` (same constructor and call)."""

    def __init__(
        self,
        config: Any,
        layer_number: int,
        attn_mask_type: Any = None,
        attention_type: str = "self",
        attention_dropout: float | None = None,
        softmax_scale: float | None = None,
        **_: Any,
    ) -> None:
        super().__init__(config=config)
        dropout = config.attention_dropout if attention_dropout is None else attention_dropout
        if dropout:
            raise ValueError(
                f"attention_dropout = {dropout}: rl-megatron's local attention runs without "
                "dropout (set it to 0, or install TransformerEngine for its attention)"
            )
        self.softmax_scale = softmax_scale

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        attn_mask_type: Any = None,
        attention_bias: torch.Tensor | None = None,
        packed_seq_params: Any = None,
    ) -> torch.Tensor:
        """THD: q [t, heads, d], k/v [t, groups, d] -> [t, heads * d]. Padded:
        q [s, b, heads, d], k/v [s, b, groups, d] -> [s, b, heads * d]."""
        if attention_bias is not None:
            raise ValueError("attention_bias is not supported by rl-megatron's local attention")
        if packed_seq_params is not None and packed_seq_params.qkv_format == "thd":
            bounds = packed_seq_params.cu_seqlens_q_padded
            if bounds is None:
                bounds = packed_seq_params.cu_seqlens_q
            out, _ = varlen_attention(
                self,
                *(t.transpose(0, 1)[None] for t in (query, key, value)),  # [1, h, t, d]
                None,
                scaling=self.softmax_scale,
                cu_seq_lens_q=bounds,
                max_length_q=packed_seq_params.max_seqlen_q,
            )
            return out[0].reshape(out.shape[1], -1)  # [1, t, h, d] -> [t, h * d]
        q, k, v = (t.permute(1, 2, 0, 3) for t in (query, key, value))  # [b, h, s, d]
        out = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, scale=self.softmax_scale, enable_gqa=q.shape[1] != k.shape[1]
        )
        return out.permute(2, 0, 1, 3).reshape(out.shape[2], out.shape[0], -1)
