"""Critic loss with value clipping (`critic.cliprange_value`)."""

from __future__ import annotations

import torch


def clipped_value_loss(
    values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, cliprange_value: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token 0.5 * max((v - R)^2, (clip(v, v_old ± c) - R)^2) [B, R], and where clipping won."""
    clipped = old_values + (values - old_values).clamp(-cliprange_value, cliprange_value)
    unclipped_loss = (values - returns).square()
    clipped_loss = (clipped - returns).square()
    return 0.5 * torch.maximum(unclipped_loss, clipped_loss), clipped_loss > unclipped_loss
