"""Variable-length (packed) batches: drop the padding of a [B, L] batch and restore it.

A `PackedLayout` records where the real tokens of a padded batch sit (computed once
from the attention mask); `unpad` / `pad` move any per-token tensor between the
padded [B, L, ...] and the packed [N, ...] form, differentiably. `cu_seqlens` and
`max_seqlen` follow the flash-attention varlen convention, and
`packed_position_ids` / `packed_labels` / `segment_ids` give what a packed forward
and loss need. Any mix of left and right padding (and holes) is fine: the real
tokens of row b, in order, become sequence b; a row without real tokens is an
empty sequence.

`segment_sum` / `segment_mean` / `segment_max` reduce packed per-token values to one
per sequence (see rl.kernels.ops.segment for the conventions).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.types import Number

from rl.kernels.ops.segment import segment_reduce
from rl.kernels.ops.varlen import pad_op, unpad_op


@dataclass(frozen=True)
class PackedLayout:
    """How a padded [B, L] batch maps to packed [N] tokens.

    indices: int64 [N], flat positions b * L + l of the real tokens, row-major.
    cu_seqlens: int32 [B + 1], cumulative real lengths (cu_seqlens[0] = 0).
    max_seqlen: the longest row's real length (0 for no tokens).
    batch, seqlen: B and L of the padded batch.
    """

    indices: torch.Tensor
    cu_seqlens: torch.Tensor
    max_seqlen: int
    batch: int
    seqlen: int

    @property
    def num_tokens(self) -> int:
        """N, the number of real tokens."""
        return self.indices.shape[0]

    @property
    def seqlens(self) -> torch.Tensor:
        """int64 [B]: the real length of each row."""
        return self.cu_seqlens.diff().long()


def packed_layout(attention_mask: torch.Tensor) -> PackedLayout:
    """The layout of the real tokens of a batch: `attention_mask` [B, L], nonzero = real.

    Any int, bool or float dtype. Reads N and max_seqlen on the host (one sync).
    """
    if attention_mask.dim() != 2:
        raise ValueError(f"attention_mask must be [B, L], got shape {tuple(attention_mask.shape)}")
    real = attention_mask != 0
    batch, seqlen = real.shape
    indices = torch.nonzero(real.reshape(-1)).reshape(-1)
    lengths = real.sum(dim=1, dtype=torch.int32)
    cu_seqlens = torch.nn.functional.pad(torch.cumsum(lengths, 0, dtype=torch.int32), (1, 0))
    max_seqlen = int(lengths.max()) if batch else 0
    return PackedLayout(indices, cu_seqlens, max_seqlen, batch, seqlen)


def unpad(x: torch.Tensor, layout: PackedLayout) -> torch.Tensor:
    """[B, L, *rest] -> [N, *rest]: the real tokens of `x`, row-major; differentiable."""
    if x.dim() < 2 or tuple(x.shape[:2]) != (layout.batch, layout.seqlen):
        raise ValueError(
            f"x must be [B, L, *rest] = [{layout.batch}, {layout.seqlen}, ...] for this "
            f"layout, got shape {tuple(x.shape)}"
        )
    return unpad_op(x, layout.indices)


def pad(packed: torch.Tensor, layout: PackedLayout, value: Number = 0) -> torch.Tensor:
    """[N, *rest] -> [B, L, *rest]: `packed` at the real positions, `value` at the padding.

    Differentiable w.r.t. `packed` (the padding gets no gradient).
    """
    if packed.dim() < 1 or packed.shape[0] != layout.num_tokens:
        raise ValueError(
            f"packed must be [N, *rest] with N = {layout.num_tokens} tokens of this layout, "
            f"got shape {tuple(packed.shape)}"
        )
    return pad_op(packed, layout.indices, layout.batch, layout.seqlen, value)


def segment_ids(layout: PackedLayout) -> torch.Tensor:
    """int64 [N]: the sequence (row) each packed token belongs to; non-decreasing."""
    rows = torch.arange(layout.batch, device=layout.indices.device)
    return torch.repeat_interleave(rows, layout.seqlens, output_size=layout.num_tokens)


def packed_position_ids(layout: PackedLayout) -> torch.Tensor:
    """int64 [N]: 0, 1, .., len - 1 within each sequence (the positions a packed forward uses)."""
    starts = layout.cu_seqlens[:-1].long()
    tokens = torch.arange(layout.num_tokens, device=layout.indices.device)
    return tokens - starts[segment_ids(layout)]


def packed_labels(
    packed_ids: torch.Tensor, layout: PackedLayout, ignore_index: int = -100
) -> torch.Tensor:
    """[N] next-token labels: the following token of the same sequence.

    packed_ids: int [N] token ids (as `unpad(input_ids, layout)`). Each sequence's last
    token gets `ignore_index`, so no label crosses into the next sequence.
    """
    if packed_ids.shape != (layout.num_tokens,):
        raise ValueError(
            f"packed_ids must be [N] = [{layout.num_tokens}] for this layout, "
            f"got shape {tuple(packed_ids.shape)}"
        )
    seg = segment_ids(layout)
    last = packed_position_ids(layout) == layout.seqlens[seg] - 1
    following = torch.roll(packed_ids, -1, 0)
    return following.masked_fill(last, ignore_index)


def aligned_cu_seqlens(cu_seqlens: torch.Tensor, multiple: int) -> torch.Tensor:
    """`cu_seqlens` [B+1] with each sequence's length rounded up to a multiple of `multiple`
    (int32 [B+1]): the padded bounds that tensor-parallel sequence parallelism and
    context-parallel sharding need (megatron-core's `cu_seqlens_q_padded`). Each sequence
    keeps its start in the padded buffer at the returned offset; empty ones stay empty."""
    if multiple < 1:
        raise ValueError(f"multiple = {multiple}: must be >= 1")
    lengths = cu_seqlens.diff().to(torch.int64)
    padded = (lengths + multiple - 1) // multiple * multiple
    out = torch.zeros(cu_seqlens.numel(), dtype=torch.int32, device=cu_seqlens.device)
    out[1:] = padded.cumsum(0)
    return out


def _segment(values, seg_ids, num_segments, mask, reduce, contiguous) -> torch.Tensor:
    if values.dim() != 1 or seg_ids.shape != values.shape:
        raise ValueError(
            f"values and seg_ids must both be [N], got shapes {tuple(values.shape)} "
            f"and {tuple(seg_ids.shape)}"
        )
    if mask is not None:
        if mask.shape != values.shape:
            raise ValueError(
                f"mask must be [N] = [{values.shape[0]}] like values, got {tuple(mask.shape)}"
            )
        mask = mask != 0
    return segment_reduce(values, seg_ids.long(), mask, num_segments, reduce, contiguous)


def segment_sum(
    values: torch.Tensor,
    seg_ids: torch.Tensor,
    num_segments: int,
    mask: torch.Tensor | None = None,
    *,
    contiguous: bool = False,
) -> torch.Tensor:
    """Per-segment sum [S] of `values` [N] (float) over tokens where `mask` [N] is nonzero.

    seg_ids: int [N] in [0, num_segments), any order (e.g. `segment_ids(layout)`).
    An empty segment sums to 0. `contiguous=True` promises seg_ids is non-decreasing,
    which lets the Triton kernel run on GPU. Differentiable w.r.t. `values`.
    """
    return _segment(values, seg_ids, num_segments, mask, "sum", contiguous)


def segment_mean(
    values: torch.Tensor,
    seg_ids: torch.Tensor,
    num_segments: int,
    mask: torch.Tensor | None = None,
    *,
    contiguous: bool = False,
) -> torch.Tensor:
    """Per-segment mean [S] over unmasked tokens, 0 for an empty segment; as `segment_sum`."""
    return _segment(values, seg_ids, num_segments, mask, "mean", contiguous)


def segment_max(
    values: torch.Tensor,
    seg_ids: torch.Tensor,
    num_segments: int,
    mask: torch.Tensor | None = None,
    *,
    contiguous: bool = False,
) -> torch.Tensor:
    """Per-segment max [S] over unmasked tokens, -inf for an empty segment; as `segment_sum`.

    -inf is max's identity, so maxima of parts of a segment merge with a MAX all-reduce.
    The gradient goes to the tokens equal to the max, split evenly among ties.
    """
    return _segment(values, seg_ids, num_segments, mask, "max", contiguous)
