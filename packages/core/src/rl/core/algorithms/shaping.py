"""Reward and advantage shaping around the estimator, as ROLL does it (its
`reward_postprocess`, `compute_token_reward` and `compute_advantage`), each switched by
its own `algorithm.*` key and off by default:

- `clip_values(values, bound, mask)`: clamp to [-bound, bound] (`algorithm.reward_clip` on
  the sequence scores and again on the token rewards after the KL penalty;
  `algorithm.advantage_clip` on the advantages, last), with the share of valid entries
  that were outside.
- `whiten(values, mask, style)`: over every valid token of the batch, padding 0
  (`algorithm.whiten_rewards` before the estimator, `algorithm.whiten_advantages` after
  it), in `algorithm.whiten_style`: `roll`, (x - mean) / sqrt(var + 1e-8) with the
  Bessel-corrected variance (ROLL's masked_whiten); `rlinf`, (x - mean) / (std + 1e-5)
  with the population std, in float64 (RLinf's masked_normalization, its
  `normalize_advantages`).

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


WHITEN_STYLES = ("roll", "rlinf")


def whiten(values: torch.Tensor, mask: torch.Tensor, style: str = "roll") -> torch.Tensor:
    """Batch whitening over the valid tokens (padding 0) in `style` (module docstring).
    `roll`: unchanged with fewer than two valid tokens, where the Bessel-corrected variance
    is undefined (ROLL skips whitening then too)."""
    if style == "rlinf":
        return _population_normalised(values, mask, epsilon=1e-5)
    if style != "roll":
        raise ValueError(f"whiten style {style!r}; allowed: {', '.join(WHITEN_STYLES)}")
    if int(mask.bool().sum()) < 2:
        return torch.where(mask.bool(), values, torch.zeros_like(values))
    return masked_whiten(values, mask, epsilon=1e-8)


def _population_normalised(
    values: torch.Tensor, mask: torch.Tensor, epsilon: float
) -> torch.Tensor:
    """(x - mean) / (std + epsilon), the population std of the valid entries, in float64
    (mean and mean of squares, as RLinf sums them)."""
    valid = mask.bool()
    wide = torch.where(valid, values.to(torch.float64), 0.0)
    count = valid.sum().to(torch.float64)
    mean = wide.sum() / count
    variance = (wide.square().sum() / count - mean.square()).clamp(min=0.0)
    normalised = ((wide - mean) / (variance.sqrt() + epsilon)).to(values.dtype)
    return torch.where(valid, normalised, torch.zeros_like(normalised))
