"""Tensor-parallel sharding of megatron-core tensors, as pure functions.

Megatron shards a column-parallel linear (qkv, fc1, the vocabulary of the
embedding and output layer) on dim 0 and a row-parallel one (proj, fc2) on
dim 1; norms, router weights and row-parallel biases are replicated. A fused
column-parallel tensor (`linear_fc1` = [gate; up]) is sharded part by part:
rank r holds [gate_r; up_r], not the r-th chunk of the concatenation. The
fused `linear_qkv` is already grouped per query group, so rank r holds whole
groups — a plain chunk, legal only when TP divides the number of groups.

Every function takes `name` only to say which tensor is at fault.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

import torch
from torch import Tensor

from .errors import LayoutError


class TPKind(StrEnum):
    """How one megatron-core tensor is laid out across tensor-parallel ranks."""

    REPLICATED = "replicated"  # every rank holds the whole tensor (norms, router, row biases)
    COLUMN = "column"  # dim 0 chunked (column-parallel weights and biases)
    ROW = "row"  # dim 1 chunked (row-parallel weights)
    GATE_UP = "gate_up"  # dim 0, each of the 2 fused parts chunked ([gate_r; up_r])
    QKV = "qkv"  # dim 0 chunked in whole query groups
    VOCAB = "vocab"  # dim 0 chunked after padding the vocabulary


def _check_divides(name: str, size: int, tp_size: int, what: str) -> None:
    if tp_size < 1 or size % tp_size:
        raise LayoutError(
            f"cannot shard {name!r} over TP {tp_size}: its {what} ({size}) is not divisible by {tp_size}"
        )


def split_parts(
    name: str, full: Tensor, tp_size: int, parts: int = 1, dim: int = 0
) -> list[Tensor]:
    """Shard `full` on `dim` into `tp_size` pieces, each holding its slice of every fused part.

    full: [..., parts*n, ...] (n on `dim`) -> tp_size tensors [..., parts*n/tp_size, ...];
    `parts=1` is the plain column (dim 0) or row (dim 1) split.
    """
    if full.dim() <= dim:
        raise LayoutError(f"cannot shard {name!r} on dim {dim}: it has shape {tuple(full.shape)}")
    _check_divides(name, full.shape[dim], parts, "fused size")
    _check_divides(name, full.shape[dim] // parts, tp_size, f"dim {dim} per fused part")
    pieces = [part.chunk(tp_size, dim=dim) for part in full.chunk(parts, dim=dim)]
    if parts == 1:
        return [piece.contiguous() for piece in pieces[0]]
    return [torch.cat([p[rank] for p in pieces], dim=dim) for rank in range(tp_size)]


def merge_parts(name: str, shards: Sequence[Tensor], parts: int = 1, dim: int = 0) -> Tensor:
    """Inverse of `split_parts`: tp_size shards [..., parts*m, ...] -> [..., parts*m*tp_size, ...]."""
    if not shards:
        raise LayoutError(f"cannot merge {name!r}: no shards given")
    if len({tuple(s.shape) for s in shards}) != 1:
        shapes = [tuple(s.shape) for s in shards]
        raise LayoutError(f"cannot merge {name!r}: shards differ in shape {shapes}")
    if parts == 1:
        return torch.cat(list(shards), dim=dim)
    _check_divides(name, shards[0].shape[dim], parts, "fused size per shard")
    per_rank = [shard.chunk(parts, dim=dim) for shard in shards]
    return torch.cat([torch.cat([r[p] for r in per_rank], dim=dim) for p in range(parts)], dim=dim)


def padded_vocab_size(vocab: int, tp_size: int, make_vocab_size_divisible_by: int = 1) -> int:
    """megatron's padded vocabulary: `vocab` rounded up to a multiple of divisible_by × tp_size."""
    multiple = make_vocab_size_divisible_by * tp_size
    return -(-vocab // multiple) * multiple


def split_vocab(
    name: str, full: Tensor, tp_size: int, make_vocab_size_divisible_by: int = 1
) -> list[Tensor]:
    """[vocab, hidden] -> tp_size shards [padded/tp_size, hidden], padded with zero rows.

    The padded size is `padded_vocab_size(vocab, tp_size, make_vocab_size_divisible_by)`;
    a `full` that is already padded further than that keeps its rows.
    """
    target = padded_vocab_size(full.shape[0], tp_size, make_vocab_size_divisible_by)
    if target > full.shape[0]:
        pad = full.new_zeros(target - full.shape[0], *full.shape[1:])
        full = torch.cat([full, pad], dim=0)
    return split_parts(name, full, tp_size)


def merge_vocab(name: str, shards: Sequence[Tensor], vocab: int | None = None) -> Tensor:
    """tp_size shards [padded/tp_size, hidden] -> [vocab, hidden], dropping the padding rows."""
    full = merge_parts(name, shards)
    if vocab is not None:
        if full.shape[0] < vocab:
            raise LayoutError(
                f"cannot merge {name!r}: shards hold {full.shape[0]} vocabulary rows, expected ≥ {vocab}"
            )
        full = full[:vocab]
    return full


def check_replicated(name: str, shards: Sequence[Tensor]) -> Tensor:
    """The one tensor every rank holds; an error if the ranks disagree (a sync bug upstream)."""
    if not shards:
        raise LayoutError(f"cannot merge {name!r}: no shards given")
    first = shards[0]
    for rank, shard in enumerate(shards[1:], start=1):
        if shard.shape != first.shape or not torch.equal(shard, first):
            raise LayoutError(
                f"replicated tensor {name!r} differs between TP rank 0 and rank {rank}"
            )
    return first
