"""Loss aggregation (`actor.loss_agg_mode`) with a global normaliser.

A mini-batch is split into micro-batches (and across data-parallel ranks);
each piece returns `numerator(piece) / denominator(whole mini-batch)`, so the
pieces add up to exactly the loss of the whole mini-batch at once.
`loss_denominator` computes that denominator, all-reduced over `group`.

Inputs are padded [B, R] tensors with a mask, or flat packed [T] tensors with
`seq_ids` [T] (long) naming each token's sequence.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from rl.core.algorithms.registry import Registry

AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")
_MODES: Registry[object] = Registry("loss aggregation mode", "actor.loss_agg_mode")
for _mode in AGG_MODES:
    _MODES.register(_mode)(_mode)


def check_agg_mode(mode: str) -> str:
    _MODES.get(mode)
    return mode


def _per_sequence(
    values: torch.Tensor, mask: torch.Tensor, seq_ids: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sequence token sums of values*mask and valid-token counts."""
    masked = values * mask
    if seq_ids is None:
        return masked.sum(-1), mask.sum(-1)
    num = int(seq_ids.max()) + 1 if seq_ids.numel() else 0
    sums = torch.zeros(num, dtype=values.dtype, device=values.device).index_add(0, seq_ids, masked)
    counts = torch.zeros(num, dtype=mask.dtype, device=mask.device).index_add(0, seq_ids, mask)
    return sums, counts


def loss_denominator(
    mode: str,
    response_mask: torch.Tensor,
    seq_ids: torch.Tensor | None = None,
    group: dist.ProcessGroup | None = None,
) -> float:
    """The normaliser of `mode` for the whole mini-batch: valid tokens, or sequences.

    Pass the mini-batch's mask (all micro-batches); with `group`, counts are summed
    over the data-parallel ranks.
    """
    check_agg_mode(mode)
    mask = response_mask.float()
    if mode == "token-mean":
        count = mask.sum()
    else:  # sequences with at least one valid token
        _, tokens = _per_sequence(mask, mask, seq_ids)
        count = (tokens > 0).float().sum()
    if group is not None and dist.is_initialized():
        count = count.clone()
        dist.all_reduce(count, group=group)
    return float(count)


def agg_loss(
    loss_mat: torch.Tensor,
    response_mask: torch.Tensor,
    mode: str,
    denominator: float | None = None,
    seq_ids: torch.Tensor | None = None,
    norm_constant: float | None = None,
) -> torch.Tensor:
    """Aggregate per-token losses [B, R] (or packed [T] with `seq_ids`) into a scalar.

    `denominator` defaults to this batch's own (`loss_denominator`); pass the whole
    mini-batch's for micro-batching. `norm_constant` is Dr.GRPO's constant length
    for `seq-mean-token-sum-norm` (default: the padded response length R).
    """
    check_agg_mode(mode)
    mask = response_mask.to(loss_mat.dtype)
    if denominator is None:
        denominator = loss_denominator(mode, response_mask, seq_ids)
    denominator = max(denominator, 1.0)
    if mode == "token-mean":
        return (loss_mat * mask).sum() / denominator
    sums, counts = _per_sequence(loss_mat, mask, seq_ids)
    if mode == "seq-mean-token-sum":
        return sums.sum() / denominator
    if mode == "seq-mean-token-mean":
        return (sums / counts.clamp(min=1)).sum() / denominator
    constant = norm_constant if norm_constant is not None else float(loss_mat.shape[-1])
    return sums.sum() / (denominator * constant)
