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
from typing import Literal

import torch
import torch.distributed as dist

from rl.core.algorithms.registry import Registry
from rl.core.algorithms.segments import sequence_sums

Numerator = Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], torch.Tensor]


@dataclass(frozen=True)
class LossAggMode:
    """One aggregation mode.

    numerator(loss_mat, response_mask, seq_ids) -> scalar: the splittable sum.
    unit: what the denominator counts — "tokens" (valid tokens), "sequences"
        (sequences with at least one valid token) or "one" (nothing: a plain sum).
    scale: what `loss_scale_factor` stands in for — "response_length" (the padded
        width R, Dr.GRPO's constant), "one" (default 1) or None (the mode has its own
        normaliser and takes no scale factor).
    """

    numerator: Numerator
    unit: Literal["tokens", "sequences", "one"]
    scale: Literal["response_length", "one"] | None = None

    @property
    def takes_scale_factor(self) -> bool:
        return self.scale is not None


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


# token-sum, seq-mean-token-sum, token-mean and seq-mean-token-sum-norm share a
# numerator: the sum of all valid token losses. Only what the denominator counts differs.
register_loss_agg_mode("token-mean")(LossAggMode(_token_sum, unit="tokens"))
register_loss_agg_mode("token-sum")(LossAggMode(_token_sum, unit="one", scale="one"))
register_loss_agg_mode("seq-mean-token-sum")(LossAggMode(_token_sum, unit="sequences"))
register_loss_agg_mode("seq-mean-token-mean")(LossAggMode(_sum_of_sequence_means, unit="sequences"))
register_loss_agg_mode("seq-mean-token-sum-norm")(
    LossAggMode(_token_sum, unit="sequences", scale="response_length")
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
    if agg.unit == "one":
        return torch.ones((), dtype=torch.float64, device=mask.device)
    _, tokens = sequence_sums(mask, mask, seq_ids)
    return (tokens > 0).to(torch.float64).sum()


def _scale(
    mode: str,
    agg: LossAggMode,
    response_mask: torch.Tensor,
    seq_ids: torch.Tensor | None,
    factor: float | None,
) -> float:
    """The fixed normaliser: `loss_scale_factor`, else the mode's default (R, or 1)."""
    if factor is not None:
        return factor
    if agg.scale == "one":
        return 1.0
    if seq_ids is not None:
        raise ValueError(f"loss_agg_mode {mode!r} on packed sequences needs loss_scale_factor")
    return float(response_mask.shape[-1])


def check_loss_scale_factor(mode: str, factor: float | None, key: str) -> None:
    """Refuse a `loss_scale_factor` that `mode` would ignore or that is not > 0.

    `key` names the config key in the message (`actor.loss_scale_factor`); an unknown
    `mode` is named as the `loss_agg_mode` beside it (`actor.loss_agg_mode`).
    """
    section, dot, _ = key.rpartition(".")
    agg = get_loss_agg_mode(mode, key=f"{section}{dot}loss_agg_mode" if dot else None)
    if factor is None:
        return
    if factor <= 0:
        raise ValueError(f"{key} = {factor!r}; allowed: > 0 or null")
    if not agg.takes_scale_factor:
        takes = [name for name in LOSS_AGG_MODES.names() if LOSS_AGG_MODES.get(name).scale]
        raise ValueError(
            f"{key} = {factor!r} has no effect with loss_agg_mode {mode!r}, which normalises "
            f"by its own count; it applies to {', '.join(takes)} — set it to null or change "
            "the mode"
        )


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
        loss_scale_factor: the fixed normaliser of the modes that take one: for
            `seq-mean-token-sum-norm` it replaces the padded response length R (keep it
            fixed across training, e.g. the max response length); `token-sum` divides by
            it (default 1). The mean modes take none (see `check_loss_scale_factor`).

    Returns:
        The denominator as a float: valid tokens, sequences, sequences x scale factor
        (`seq-mean-token-sum-norm`) or the scale factor alone (`token-sum`).
    """
    agg = get_loss_agg_mode(mode)
    count = _count(agg, response_mask, seq_ids)
    if agg.unit != "one" and group is not None and dist.is_available() and dist.is_initialized():
        dist.all_reduce(count, group=group)
    total = float(count)
    if agg.takes_scale_factor:
        total *= _scale(mode, agg, response_mask, seq_ids, loss_scale_factor)
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
        mode: `token-mean`, `token-sum`, `seq-mean-token-sum`, `seq-mean-token-mean`,
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
