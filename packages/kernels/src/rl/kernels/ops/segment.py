"""Segment reductions: per-sequence sum, mean and max of packed token values.

`rl_kernels::segment_reduce(values [N], seg_ids [N], mask [N] | None, num_segments,
reduce, contiguous)` returns one value per segment [S] in the dtype of `values`:

- masked-out tokens are excluded;
- an empty segment (no unmasked token) gives sum 0, mean 0 and max -inf: the
  identity of each reduction, so partial results from shards of one segment
  merge with an all-reduce SUM / MAX (mean is sum / count, merged as such);
- float16/bfloat16 values accumulate in float32 (the result is cast back).

Implementations: the torch reference (`index_add` / `scatter_reduce`, any order of
`seg_ids`) and a Triton kernel (one program per segment, segment_triton.py) that
needs each segment's tokens contiguous and in segment order, as
`segment_ids(layout)` gives them; callers promise that with `contiguous=True`,
otherwise the reference runs. The backward is a gather (`grad[seg_ids]`) in torch:
a memory move torch does at bandwidth. The gradient of max goes to the tokens equal
to their segment's max, split evenly among ties (as `torch.amax` does).
"""

from __future__ import annotations

import torch

from rl.kernels import _backend

OP_NAME = "segment_reduce"
REDUCTIONS = ("sum", "mean", "max")


def available_impls(device_type: str, contiguous: bool = True) -> set[str]:
    """Implementations of this op usable on `device_type` in this process."""
    impls = {"reference"}
    triton_here = device_type == "cuda" or _backend.triton_interpreted()
    if contiguous and triton_here and _backend.triton_usable():
        impls.add("triton")
    return impls


def chosen_impl(device_type: str, contiguous: bool = True) -> str:
    """The implementation segment_reduce runs on `device_type` (RL_KERNELS_IMPL wins)."""
    return _backend.choose_impl(OP_NAME, device_type, available_impls(device_type, contiguous))


def accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """float64 stays float64; every other float type accumulates in float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def segment_reduce_reference(
    values: torch.Tensor,
    seg_ids: torch.Tensor,
    mask: torch.Tensor | None,
    num_segments: int,
    reduce: str,
) -> torch.Tensor:
    """Torch oracle of segment_reduce (see the module docstring); any order of seg_ids."""
    if reduce == "max":
        if mask is not None:
            values = values.masked_fill(~mask, float("-inf"))
        out = values.new_full((num_segments,), float("-inf"))
        return out.scatter_reduce_(0, seg_ids, values, "amax", include_self=True)
    acc = values.to(accumulation_dtype(values.dtype))
    if mask is not None:
        acc = acc.masked_fill(~mask, 0.0)
    sums = acc.new_zeros(num_segments).index_add_(0, seg_ids, acc)
    if reduce == "mean":
        sums = sums / segment_counts(seg_ids, mask, num_segments, sums.dtype).clamp(min=1)
    return sums.to(values.dtype)


def segment_counts(
    seg_ids: torch.Tensor, mask: torch.Tensor | None, num_segments: int, dtype: torch.dtype
) -> torch.Tensor:
    """Number of unmasked tokens per segment [S] in `dtype`."""
    ones = torch.ones(seg_ids.shape, dtype=dtype, device=seg_ids.device)
    if mask is not None:
        ones = ones * mask
    return ones.new_zeros(num_segments).index_add_(0, seg_ids, ones)


def _check(values, seg_ids, mask, num_segments, reduce) -> None:
    if reduce not in REDUCTIONS:
        raise ValueError(f"reduce must be one of {REDUCTIONS}, got {reduce!r}")
    if values.dim() != 1 or not values.is_floating_point():
        raise ValueError(
            f"values must be a floating [N] tensor, got {values.dtype} {tuple(values.shape)}"
        )
    if seg_ids.shape != values.shape or seg_ids.dtype != torch.int64:
        raise ValueError(
            f"seg_ids must be int64 [N = {values.shape[0]}], got {seg_ids.dtype} "
            f"{tuple(seg_ids.shape)}"
        )
    if mask is not None and (mask.shape != values.shape or mask.dtype != torch.bool):
        raise ValueError(
            f"mask must be bool [N = {values.shape[0]}], got {mask.dtype} {tuple(mask.shape)}"
        )
    if num_segments < 0:
        raise ValueError(f"num_segments must be >= 0, got {num_segments}")


@torch.library.custom_op("rl_kernels::segment_reduce", mutates_args=())
def segment_reduce(
    values: torch.Tensor,
    seg_ids: torch.Tensor,
    mask: torch.Tensor | None,
    num_segments: int,
    reduce: str,
    contiguous: bool,
) -> torch.Tensor:
    """Per-segment sum / mean / max [S] of `values` [N] (float) over unmasked tokens.

    seg_ids: int64 [N] in [0, num_segments); mask: bool [N] or None (all tokens);
    contiguous: the caller promises seg_ids is non-decreasing (enables Triton).
    """
    _check(values, seg_ids, mask, num_segments, reduce)
    if chosen_impl(values.device.type, contiguous) == "triton":
        from rl.kernels.ops import segment_triton

        return segment_triton.segment_reduce(values, seg_ids, mask, num_segments, reduce)
    return segment_reduce_reference(values, seg_ids, mask, num_segments, reduce)


@segment_reduce.register_fake
def _(values, seg_ids, mask, num_segments, reduce, contiguous):
    return values.new_empty((num_segments,))


def _setup(ctx, inputs, output):
    values, seg_ids, mask, num_segments, reduce, _ = inputs
    ctx.reduce, ctx.num_segments = reduce, num_segments
    ctx.save_for_backward(values if reduce == "max" else None, seg_ids, mask, output)


def _backward(ctx, grad):
    values, seg_ids, mask, output = ctx.saved_tensors
    dtype = accumulation_dtype(grad.dtype)
    if ctx.reduce == "max":
        # Tokens equal to their segment's max share its gradient evenly.
        winners = values == output[seg_ids]
        if mask is not None:
            winners = winners & mask
        ties = segment_counts(seg_ids, winners, ctx.num_segments, dtype)
        share = grad.to(dtype) / ties.clamp(min=1)
        grad_values = torch.where(winners, share[seg_ids], 0.0)
    else:
        per_segment = grad.to(dtype)
        if ctx.reduce == "mean":
            counts = segment_counts(seg_ids, mask, ctx.num_segments, dtype)
            per_segment = per_segment / counts.clamp(min=1)
        grad_values = per_segment[seg_ids]
        if mask is not None:
            grad_values = grad_values * mask
    return grad_values.to(grad.dtype), None, None, None, None, None


segment_reduce.register_autograd(_backward, setup_context=_setup)
