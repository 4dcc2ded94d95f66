"""Attention over packed rows without an [N, N] mask: `rl_varlen`.

Packed, a micro-batch is one row of N tokens holding many sequences. Hugging Face's
`sdpa` path then builds a block-diagonal causal mask of N x N and attends over all N
keys per query (cost ~N^2, more than the padded batch's B * L^2 once N >> L). `rl_varlen`
attends within each sequence only (cost sum(L_i^2)): `flash_attn_varlen_func` on GPU when
flash-attn is installed, else one causal SDPA call per sequence. The sequence bounds
come from `cu_seq_lens_q` / `max_length_q`, which the caller passes to the model call
and transformers hands to the attention function (its flash-attention kwargs).

`register()` makes it selectable with `model.set_attn_implementation("rl_varlen")`
(transformers is imported only then: rl-kernels does not depend on it).
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import torch
import torch.nn.functional as F

NAME = "rl_varlen"


def varlen_attention(
    module: torch.nn.Module,
    query: torch.Tensor,  # [1, H, N, D]
    key: torch.Tensor,  # [1, H_kv, N, D]
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Causal attention within each packed sequence; returns [1, N, H, D] as HF expects."""
    cu_seqlens = kwargs.get("cu_seq_lens_q")
    if cu_seqlens is None or query.shape[0] != 1:
        raise ValueError(
            "rl_varlen attention needs one packed row and cu_seq_lens_q (the packed sequence bounds)"
        )
    if query.is_cuda and _flash_varlen() is not None:
        return _flash(query, key, value, cu_seqlens, kwargs["max_length_q"], scaling), None
    groups = query.shape[1] // key.shape[1]
    bounds = cu_seqlens.tolist()
    out = torch.empty_like(query)
    for start, end in itertools.pairwise(bounds):
        if end > start:
            out[:, :, start:end] = F.scaled_dot_product_attention(
                query[:, :, start:end],
                key[:, :, start:end],
                value[:, :, start:end],
                is_causal=True,
                scale=scaling,
                enable_gqa=groups > 1,
            )
    return out.transpose(1, 2).contiguous(), None


@functools.cache
def _flash_varlen() -> Any:
    try:
        from flash_attn import flash_attn_varlen_func
    except ImportError:
        return None
    return flash_attn_varlen_func


def _flash(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    cu_seqlens: torch.Tensor,
    max_seqlen: int,
    scaling: float | None,
) -> torch.Tensor:
    cu = cu_seqlens.to(torch.int32)
    out = _flash_varlen()(
        query[0].transpose(0, 1),  # [N, H, D]
        key[0].transpose(0, 1),
        value[0].transpose(0, 1),
        cu,
        cu,
        int(max_seqlen),
        int(max_seqlen),
        softmax_scale=scaling,
        causal=True,
    )
    return out[None]  # [1, N, H, D]


def _no_mask(*args: Any, **kwargs: Any) -> None:
    return None


@functools.cache
def register() -> str:
    """Make `rl_varlen` an attention implementation transformers can select; its name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(NAME, varlen_attention)
    AttentionMaskInterface.register(NAME, _no_mask)
    return NAME
