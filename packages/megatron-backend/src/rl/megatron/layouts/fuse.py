"""How several Hugging Face tensors become one megatron-core tensor, and back.

A `Fuse` is a pair of pure functions, `merge(parts, dims) -> fused` and
`split(fused, dims) -> parts`, with `split(merge(p)) == p` bit for bit. The
parts are in the order the table lists the HF names. Nothing here copies more
than `torch.cat` must; `split` returns views where the layout allows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from .dims import ModelDims


@dataclass(frozen=True)
class Fuse:
    """A named merge/split pair; `merge(split(t)) == t` and `split(merge(p)) == p`."""

    name: str
    merge: Callable[[Sequence[Tensor], ModelDims], Tensor]
    split: Callable[[Tensor, ModelDims], list[Tensor]]


def _identity_merge(parts: Sequence[Tensor], dims: ModelDims) -> Tensor:
    (tensor,) = parts
    return tensor


def _identity_split(fused: Tensor, dims: ModelDims) -> list[Tensor]:
    return [fused]


def _vocab_split(fused: Tensor, dims: ModelDims) -> list[Tensor]:
    # megatron pads the vocabulary rows to a TP-friendly multiple; HF has none.
    return [fused[: dims.vocab]]


def qkv_merge(parts: Sequence[Tensor], dims: ModelDims) -> Tensor:
    """q, k, v (HF) -> megatron-core's fused `linear_qkv` weight or bias.

    q: [heads*head_dim, *rest], k and v: [kv_heads*head_dim, *rest] ->
    [kv_heads * (heads/kv_heads + 2) * head_dim, *rest], grouped per query
    group: the group's q heads, then its k head, then its v head.
    """
    q, k, v = parts
    groups, rest = dims.kv_heads, q.shape[1:]
    grouped = [
        q.reshape(groups, -1, *rest),
        k.reshape(groups, -1, *rest),
        v.reshape(groups, -1, *rest),
    ]
    return torch.cat(grouped, dim=1).reshape(-1, *rest)


def qkv_split(fused: Tensor, dims: ModelDims) -> list[Tensor]:
    """megatron-core's fused `linear_qkv` weight or bias -> [q, k, v]; inverse of `qkv_merge`."""
    groups, rest = dims.kv_heads, fused.shape[1:]
    q_per_group = dims.heads // dims.kv_heads * dims.head_dim
    sizes = [q_per_group, dims.head_dim, dims.head_dim]
    grouped = fused.reshape(groups, sum(sizes), *rest)
    return [part.reshape(-1, *rest) for part in grouped.split(sizes, dim=1)]


def concat_merge(parts: Sequence[Tensor], dims: ModelDims) -> Tensor:
    """[gate, up] (each [ffn, hidden]) -> `linear_fc1` [2*ffn, hidden]: gate rows, then up rows."""
    return torch.cat(list(parts), dim=0)


def concat_split(fused: Tensor, dims: ModelDims) -> list[Tensor]:
    """`linear_fc1` [2*ffn, hidden] -> [gate, up]; inverse of `concat_merge`."""
    return list(fused.chunk(2, dim=0))


IDENTITY = Fuse("identity", _identity_merge, _identity_split)
VOCAB = Fuse("vocab", _identity_merge, _vocab_split)
QKV = Fuse("qkv", qkv_merge, qkv_split)
GATE_UP = Fuse("gate_up", concat_merge, concat_split)
