"""Critic loss with value clipping (`critic.cliprange_value`).

The clipped target keeps a value head from moving more than `cliprange_value` away
from its rollout-time prediction in one update, the critic's analogue of PPO's
ratio clip; taking the max of both errors makes the clip pessimistic, never helpful.
"""

from __future__ import annotations

import torch

from rl.core.algorithms.aggregation import agg_loss
from rl.core.algorithms.masked import masked_mean


def clipped_value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    cliprange_value: float | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token 0.5 * max((v - R)^2, (clip(v, v_old -+ c) - R)^2) and where clipping won.

    Args:
        values: float [B, R] (or [T]) current critic predictions.
        old_values: predictions at rollout time, like `values`.
        returns: targets, like `values`.
        cliprange_value: c; None disables clipping (plain squared error).

    Returns:
        (loss like `values`, bool like `values`: the clipped error was the larger).
    """
    unclipped = (values - returns).square()
    if cliprange_value is None:
        return 0.5 * unclipped, torch.zeros_like(unclipped, dtype=torch.bool)
    clipped_values = old_values + (values - old_values).clamp(-cliprange_value, cliprange_value)
    clipped = (clipped_values - returns).square()
    return 0.5 * torch.maximum(unclipped, clipped), clipped > unclipped


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    response_mask: torch.Tensor,
    cliprange_value: float | None,
    loss_agg_mode: str = "token-mean",
    denominator: float | None = None,
    seq_ids: torch.Tensor | None = None,
    loss_scale_factor: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The critic's scalar loss for one (micro-)batch and its metrics.

    Tensors as in `clipped_value_loss`; `response_mask` like `values`; `denominator`,
    `seq_ids` and `loss_scale_factor` (`critic.loss_scale_factor`) as in
    `aggregation.agg_loss`.

    Returns:
        (scalar loss, {critic/vf_loss, critic/vf_clipfrac, critic/vpred_mean}).
    """
    per_token, clipped = clipped_value_loss(values, old_values, returns, cliprange_value)
    loss = agg_loss(
        per_token, response_mask, loss_agg_mode, denominator, seq_ids, loss_scale_factor
    )
    return loss, {
        "critic/vf_loss": float(loss.detach()),
        "critic/vf_clipfrac": float(masked_mean(clipped.to(values.dtype), response_mask)),
        "critic/vpred_mean": float(masked_mean(values.detach(), response_mask)),
    }
