"""Triton forward of segment_reduce over contiguous segments: one program per segment.

Segment s owns tokens [bounds[s], bounds[s + 1]) (seg_ids non-decreasing; the
bounds come from a `searchsorted`, no host sync). Each program walks its range in
blocks, accumulating in float32 (float64 for float64 values) with the mask
applied, and writes one number; no atomics, so the result is deterministic.
Empty segments give sum 0, mean 0, max -inf, as the reference does.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from rl.kernels.ops.segment import accumulation_dtype

DEFAULT_BLOCK = 1024
_REDUCE_CODES = {"sum": 0, "mean": 1, "max": 2}


@triton.jit
def _segment_reduce_kernel(
    values_ptr,
    mask_ptr,
    bounds_ptr,
    out_ptr,
    HAS_MASK: tl.constexpr,
    REDUCE: tl.constexpr,  # 0 sum, 1 mean, 2 max
    BLOCK: tl.constexpr,
):
    segment = tl.program_id(0)
    start = tl.load(bounds_ptr + segment)
    end = tl.load(bounds_ptr + segment + 1)
    offsets = tl.arange(0, BLOCK)
    acc_type = out_ptr.dtype.element_ty
    # max starts from its identity, -inf; sum and mean from 0.
    acc = tl.full([BLOCK], float("-inf") if REDUCE == 2 else 0.0, acc_type)
    count = tl.zeros([BLOCK], acc_type)
    for block_start in range(start, end, BLOCK):
        index = block_start + offsets
        keep = index < end
        if HAS_MASK:
            keep = keep & (tl.load(mask_ptr + index, mask=keep, other=0) != 0)
        if REDUCE == 2:
            x = tl.load(values_ptr + index, mask=keep, other=float("-inf"))
            acc = tl.maximum(acc, x.to(acc_type))
        else:
            x = tl.load(values_ptr + index, mask=keep, other=0.0)
            acc += x.to(acc_type)
            count += keep.to(acc_type)
    if REDUCE == 2:
        result = tl.max(acc, axis=0)
    else:
        result = tl.sum(acc, axis=0)
        if REDUCE == 1:
            result = result / tl.maximum(tl.sum(count, axis=0), 1.0)
    tl.store(out_ptr + segment, result)


def segment_bounds(seg_ids: torch.Tensor, num_segments: int) -> torch.Tensor:
    """int64 [S + 1]: segment s spans tokens [bounds[s], bounds[s + 1]) of sorted `seg_ids`."""
    targets = torch.arange(num_segments + 1, device=seg_ids.device, dtype=seg_ids.dtype)
    return torch.searchsorted(seg_ids, targets)


def segment_reduce(
    values: torch.Tensor,
    seg_ids: torch.Tensor,
    mask: torch.Tensor | None,
    num_segments: int,
    reduce: str,
    block: int = DEFAULT_BLOCK,
) -> torch.Tensor:
    """[S] in the dtype of `values`; `seg_ids` [N] int64 non-decreasing, `mask` bool [N]."""
    out = torch.empty(num_segments, dtype=accumulation_dtype(values.dtype), device=values.device)
    if num_segments == 0:
        return out.to(values.dtype)
    values = values.contiguous()
    bounds = segment_bounds(seg_ids.contiguous(), num_segments)
    _segment_reduce_kernel[(num_segments,)](
        values,
        values if mask is None else mask.contiguous(),
        bounds,
        out,
        HAS_MASK=mask is not None,
        REDUCE=_REDUCE_CODES[reduce],
        BLOCK=block,
    )
    return out.to(values.dtype)
