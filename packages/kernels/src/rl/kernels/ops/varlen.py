"""Unpad / pad: move the real tokens of a padded [B, L] batch to packed [N] and back.

`rl_kernels::unpad(x, indices)` gathers rows `indices` (flat positions b * L + l)
of `x` [B, L, *rest] into [N, *rest]; `rl_kernels::pad(packed, indices, batch,
seqlen, value)` scatters them back into a [B, L, *rest] tensor filled with
`value`. Each is the other's backward, so gradients (and gradients of
gradients) flow through both.

Only a torch implementation exists, on purpose: both are pure memory moves
(one `index_select`, one `index_copy_` into a filled tensor) that torch's
index kernels already run at memory bandwidth on every device; a custom kernel
could only match them. They are custom ops all the same so that torch.compile
treats them as opaque, shape-known nodes (their fakes need no data).
"""

from __future__ import annotations

import torch
from torch.types import Number


def _check_indices(indices: torch.Tensor) -> None:
    if indices.dim() != 1 or indices.dtype != torch.int64:
        raise ValueError(f"indices must be int64 [N], got {indices.dtype} {tuple(indices.shape)}")


def unpad_reference(x: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """Torch oracle: `x.reshape(B * L, *rest)[indices]`."""
    return x.reshape(x.shape[0] * x.shape[1], *x.shape[2:]).index_select(0, indices)


def pad_reference(
    packed: torch.Tensor, indices: torch.Tensor, batch: int, seqlen: int, value: Number
) -> torch.Tensor:
    """Torch oracle: a [B, L, *rest] tensor of `value` with `packed` written at `indices`."""
    rest = packed.shape[1:]
    out = packed.new_full((batch * seqlen, *rest), value)
    out.index_copy_(0, indices, packed)
    return out.view(batch, seqlen, *rest)


@torch.library.custom_op("rl_kernels::unpad", mutates_args=())
def unpad_op(x: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """[B, L, *rest] -> [N, *rest]: the rows of `x` at flat positions `indices` (int64 [N])."""
    if x.dim() < 2:
        raise ValueError(f"x must be [B, L, *rest], got shape {tuple(x.shape)}")
    _check_indices(indices)
    return unpad_reference(x, indices)


@unpad_op.register_fake
def _(x, indices):
    return x.new_empty((indices.shape[0], *x.shape[2:]))


@torch.library.custom_op("rl_kernels::pad", mutates_args=())
def pad_op(
    packed: torch.Tensor, indices: torch.Tensor, batch: int, seqlen: int, value: Number
) -> torch.Tensor:
    """[N, *rest] -> [B, L, *rest]: `packed` at flat positions `indices`, `value` elsewhere."""
    _check_indices(indices)
    if packed.dim() < 1 or packed.shape[0] != indices.shape[0]:
        raise ValueError(
            f"packed must be [N = {indices.shape[0]}, *rest], got shape {tuple(packed.shape)}"
        )
    return pad_reference(packed, indices, batch, seqlen, value)


@pad_op.register_fake
def _(packed, indices, batch, seqlen, value):
    return packed.new_empty((batch, seqlen, *packed.shape[1:]))


def _unpad_setup(ctx, inputs, output):
    x, indices = inputs
    ctx.save_for_backward(indices)
    ctx.batch, ctx.seqlen = x.shape[0], x.shape[1]


def _unpad_backward(ctx, grad):
    (indices,) = ctx.saved_tensors
    return pad_op(grad, indices, ctx.batch, ctx.seqlen, 0), None


def _pad_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[1])


def _pad_backward(ctx, grad):
    (indices,) = ctx.saved_tensors
    return unpad_op(grad, indices), None, None, None, None


unpad_op.register_autograd(_unpad_backward, setup_context=_unpad_setup)
pad_op.register_autograd(_pad_backward, setup_context=_pad_setup)
