"""Loss aggregation (`actor.loss_agg_mode`, `critic.loss_agg_mode`) with a global normaliser.

Every mode is `numerator / denominator`. The numerator is a plain sum over the
tokens or sequences at hand, so it splits exactly over micro-batches and ranks; the
denominator counts the *whole* mini-batch (all micro-batches, all data-parallel
ranks). Each micro-batch returns `numerator(piece) / denominator(mini-batch)`, and
the pieces add up to the mini-batch loss computed at once. `loss_denominator` gives
that denominator (all-reduced over `group`); engines pass it to `agg_loss`.

Engines whose gradient all-reduce *averages* over data-parallel ranks (DDP, FSDP)
get the mean instead of the sum of the ranks' pieces: multiply each rank's loss by
the data-parallel world size to keep the mini-batch loss.

Inputs are padded [B, R] tensors with a mask, or packed [T] tensors with `seq_ids`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from rl.core.algorithms.registry import Registry
from rl.core.algorithms.segments import sequence_sums

Numerator = Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], torch.Tensor]


@dataclass(frozen=True)
class LossAggMode:
    """One aggregation mode.

    numerator(loss_mat, response_mask, seq_ids) -> scalar: the splittable sum.
    unit: what the denominator counts — "tokens" (valid tokens) or "sequences"
        (sequences with at least one valid token).
    scaled: the denominator is also multiplied by `loss_scale_factor` (Dr.GRPO's
        constant length).
    """

    numerator: Numerator
    unit: str
    scaled: bool = False


LOSS_AGG_MODES: Registry[LossAggMode] = Registry("loss aggregation mode", "actor.loss_agg_mode")
register_loss_agg_mode = LOSS_AGG_MODES.register
get_loss_agg_mode = LOSS_AGG_MODES.get


def _token_sum(
    loss: torch.Tensor, mask: torch.Tensor, seq_ids: torch.Tensor | None
) -> torch.Tensor:
    return torch.where(mask.bool(), loss, torch.zeros_like(loss)).sum()


def _sum_of_sequence_means(
    loss: torch.Tensor, mask: torch.Tensor, seq_ids: torch.Tensor | None
) -> torch.Tensor:
    sums, counts = sequence_sums(loss, mask, seq_ids)
    return (sums / counts.clamp(min=1)).sum()


# seq-mean-token-sum and token-mean share a numerator: the sum of a sequence's token
# sums is the sum of all tokens. Only what the denominator counts differs.
register_loss_agg_mode("token-mean")(LossAggMode(_token_sum, unit="tokens"))
register_loss_agg_mode("seq-mean-token-sum")(LossAggMode(_token_sum, unit="sequences"))
register_loss_agg_mode("seq-mean-token-mean")(LossAggMode(_sum_of_sequence_means, unit="sequences"))
register_loss_agg_mode("seq-mean-token-sum-norm")(
    LossAggMode(_token_sum, unit="sequences", scaled=True)
)


def _count(
    agg: LossAggMode,
    response_mask: torch.Tensor,
    seq_ids: torch.Tensor | None,
) -> torch.Tensor:
    """Valid tokens, or sequences with at least one, in `response_mask`: float64 scalar."""
    mask = response_mask.to(torch.float64)
    if agg.unit == "tokens":
        return mask.sum()
    _, tokens = sequence_sums(mask, mask, seq_ids)
    return (tokens > 0).to(torch.float64).sum()


def _scale(
    mode: str, response_mask: torch.Tensor, seq_ids: torch.Tensor | None, factor: float | None
) -> float:
    """Dr.GRPO's constant: `loss_scale_factor`, else the padded response length."""
    if factor is not None:
        return factor
    if seq_ids is not None:
        raise ValueError(f"loss_agg_mode {mode!r} on packed sequences needs loss_scale_factor")
    return float(response_mask.shape[-1])


def loss_denominator(
    mode: str,
    response_mask: torch.Tensor,
    seq_ids: torch.Tensor | None = None,
    group: dist.ProcessGroup | None = None,
    loss_scale_factor: float | None = None,
) -> float:
    """The normaliser of `mode` for a whole mini-batch.

    Args:
        mode: the loss aggregation mode.
        response_mask: this rank's mask for the mini-batch — all its micro-batches —
            [B, R] (or [T] packed with `seq_ids` [T]).
        group: data-parallel process group; counts are summed over its ranks.
        loss_scale_factor: the constant of `seq-mean-token-sum-norm` (default: the padded
            response length R; keep it fixed across training, e.g. the max response length).

    Returns:
        The denominator as a float: valid tokens, sequences, or sequences x scale factor.
    """
    agg = get_loss_agg_mode(mode)
    count = _count(agg, response_mask, seq_ids)
    if group is not None and dist.is_available() and dist.is_initialized():
        dist.all_reduce(count, group=group)
    total = float(count)
    if agg.scaled:
        total *= _scale(mode, response_mask, seq_ids, loss_scale_factor)
    return total


def agg_loss(
    loss_mat: torch.Tensor,
    response_mask: torch.Tensor,
    mode: str,
    denominator: float | None = None,
    seq_ids: torch.Tensor | None = None,
    loss_scale_factor: float | None = None,
) -> torch.Tensor:
    """Aggregate per-token losses into a scalar: numerator(this piece) / denominator.

    Args:
        loss_mat: float [B, R], or [T] with `seq_ids` [T] (long) when packed.
        response_mask: same shape, bool or 0/1; padded positions never count.
        mode: `token-mean`, `seq-mean-token-sum`, `seq-mean-token-mean`,
            `seq-mean-token-sum-norm`, or a registered one.
        denominator: the whole mini-batch's, from `loss_denominator`; default: this
            piece's own, which makes the piece its own mini-batch.
        loss_scale_factor: see `loss_denominator` (used only when `denominator` is None).

    Returns:
        A scalar in the dtype of `loss_mat`, differentiable in `loss_mat`.
    """
    agg = get_loss_agg_mode(mode)
    if denominator is None:
        denominator = loss_denominator(
            mode, response_mask, seq_ids, loss_scale_factor=loss_scale_factor
        )
    # An empty mini-batch has a zero numerator too; 1 keeps the result 0, not NaN.
    return agg.numerator(loss_mat, response_mask, seq_ids) / (denominator or 1.0)
