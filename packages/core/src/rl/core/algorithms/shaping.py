"""Reward and advantage shaping around the estimator, as ROLL does it (its
`reward_postprocess`, `compute_token_reward` and `compute_advantage`), each switched by
its own `algorithm.*` key and off by default:

- `clip_values(values, bound, mask)`: clamp to [-bound, bound] (`algorithm.reward_clip` on
  the sequence scores and again on the token rewards after the KL penalty;
  `algorithm.advantage_clip` on the advantages, last), with the share of valid entries
  that were outside.
- `whiten(values, mask)`: (x - mean) / sqrt(var + 1e-8) over every valid token of the
  batch, Bessel-corrected variance, padding 0 (`algorithm.whiten_rewards` before the
  estimator, `algorithm.whiten_advantages` after it).

Padded [B, R] or packed [T] tensors alike: each works element-wise or over the whole batch.
"""

from __future__ import annotations

import torch

from rl.core.algorithms.masked import masked_whiten


def clip_values(
    values: torch.Tensor, bound: float, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, float]:
    """(values clamped to [-bound, bound], the share of valid entries outside it)."""
    if bound <= 0:
        raise ValueError(f"clip bound = {bound!r}; allowed: > 0")
    outside = values.abs() > bound
    if mask is None:
        share = float(outside.float().mean()) if values.numel() else 0.0
    else:
        valid = mask.bool()
        count = int(valid.sum())
        share = float((outside & valid).sum()) / count if count else 0.0
    return values.clamp(min=-bound, max=bound), share


def whiten(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Batch whitening over the valid tokens (padding 0); unchanged with fewer than two,
    where the Bessel-corrected variance is undefined (ROLL skips whitening then too)."""
    if int(mask.bool().sum()) < 2:
        return torch.where(mask.bool(), values, torch.zeros_like(values))
    return masked_whiten(values, mask, epsilon=1e-8)
