"""Masked reductions: padding (mask 0) never contributes to a statistic."""

from __future__ import annotations

import torch


def masked_sum(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    masked = torch.where(mask.bool(), values, torch.zeros_like(values))
    return masked.sum() if dim is None else masked.sum(dim)


def masked_mean(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean over positions where `mask` is 1 (0 when there are none)."""
    count = mask.sum() if dim is None else mask.sum(dim)
    return masked_sum(values, mask, dim) / count.clamp(min=1)


def masked_var(values: torch.Tensor, mask: torch.Tensor, unbiased: bool = True) -> torch.Tensor:
    mean = masked_mean(values, mask)
    count = mask.sum()
    squares = masked_sum((values - mean) ** 2, mask)
    return squares / (count - 1).clamp(min=1) if unbiased else squares / count.clamp(min=1)


def masked_whiten(
    values: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True, epsilon: float = 1e-8
) -> torch.Tensor:
    """(values - mean) / std over the masked positions; padding comes out as 0."""
    mean, var = masked_mean(values, mask), masked_var(values, mask)
    whitened = (values - mean) * torch.rsqrt(var + epsilon)
    if not shift_mean:
        whitened = whitened + mean
    return torch.where(mask.bool(), whitened, torch.zeros_like(whitened))


def masked_stats(values: torch.Tensor, mask: torch.Tensor, prefix: str) -> dict[str, float]:
    """mean / max / min of the valid positions, as plain floats for logging."""
    valid = values[mask.bool()]
    if valid.numel() == 0:
        return {f"{prefix}/mean": 0.0, f"{prefix}/max": 0.0, f"{prefix}/min": 0.0}
    return {
        f"{prefix}/mean": float(valid.mean()),
        f"{prefix}/max": float(valid.max()),
        f"{prefix}/min": float(valid.min()),
    }
