"""A tied embedding's lookup at a real vocabulary: its gradient rows go straight into the
shared weight's `.grad`, in place.

The weight [V, H] is used twice, by the lookup at the bottom of the model and by the LM
head at the top. Left to autograd, the two gradients meet in the leaf's input buffer:
a dense lookup gradient is a second [V, H] tensor (545 MB at Qwen2.5's 151,936 x 896 in
fp32), and a sparse one (`nn.Embedding(sparse=True)`) is added to the head's dense one
out of place, a third [V, H] tensor at the backward's peak. Here the lookup's backward adds
its rows (`index_add_`) into `weight.grad` in place once it holds the head's gradient: autograd
sums a leaf's gradients in a buffer and writes `.grad` after the leaf's last use has run
backward (the lookup, at the very end), so the rows wait for the weight's
post-accumulate-grad hook. (Adding them into a zeroed `.grad` before that made a second
[V, H] tensor beside the head's waiting one: 519 MiB at the end of the 0.5B shape's
backward, its peak.) The sum is the same in either order. Only for plain (unsharded)
parameters, which are the only ones autograd accumulates into `.grad` directly.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.nn.functional as F


class _RowsIntoGrad(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, ids: torch.Tensor, weight: torch.Tensor, padding_idx: int | None
    ) -> torch.Tensor:
        ctx.save_for_backward(ids)
        ctx.weight, ctx.padding_idx = weight, padding_idx
        return F.embedding(ids, weight, padding_idx)

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[None, None, None]:
        (ids,) = ctx.saved_tensors
        weight, flat = ctx.weight, ids.reshape(-1)
        rows = grad_out.reshape(-1, grad_out.shape[-1]).to(weight.dtype)
        if ctx.padding_idx is not None:  # the padding row gets no gradient (as F.embedding)
            rows = rows.masked_fill((flat == ctx.padding_idx)[:, None], 0.0)
        # the head's gradient waits in autograd's buffer until this node has run: the rows
        # are added once it is in `.grad` (`_add_pending_rows`), not into a zeroed [V, H]
        weight._pending_rows.append((flat, rows))
        return None, None, None


def _add_pending_rows(weight: torch.Tensor) -> None:
    """After autograd put the head's gradient into `.grad`: the lookup's rows, in place."""
    for flat, rows in weight._pending_rows:
        weight.grad.index_add_(0, flat, rows)
    weight._pending_rows.clear()


def _lookup(embedding: torch.nn.Embedding, ids: torch.Tensor) -> torch.Tensor:
    weight = embedding.weight
    if not (torch.is_grad_enabled() and weight.requires_grad):
        return F.embedding(ids, weight, embedding.padding_idx)
    return _RowsIntoGrad.apply(ids, weight, embedding.padding_idx)


def rows_into_gradient(model: torch.nn.Module) -> bool:
    """Make `model`'s input embedding add its gradient rows into its weight's `.grad` in
    place; False (nothing changed) where it cannot: not an `nn.Embedding`, one with
    max_norm, frequency scaling or sparse gradients of its own, or a frozen one."""
    embedding = model.get_input_embeddings()
    if type(embedding) is not torch.nn.Embedding:
        return False
    if (
        embedding.max_norm is not None
        or embedding.scale_grad_by_freq
        or embedding.sparse
        or type(embedding.weight) is not torch.nn.Parameter
        or not embedding.weight.requires_grad  # frozen (LoRA): no gradient to place
    ):
        return False
    weight = embedding.weight
    if not hasattr(weight, "_pending_rows"):
        weight._pending_rows = []  # type: ignore[attr-defined]
        weight.register_post_accumulate_grad_hook(_add_pending_rows)
    embedding.forward = functools.partial(_lookup, embedding)  # type: ignore[method-assign]
    return True
