"""Masked reductions: positions where the mask is 0 never contribute to a statistic.

`values` is any float tensor and `mask` a tensor of the same shape (bool, or float
0/1). Padded positions are selected away with `torch.where` rather than multiplied
by 0, so a NaN or inf sitting in padding cannot leak into the result.
"""

from __future__ import annotations

import torch


def masked_sum(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Sum of `values` where `mask` is set: a scalar, or reduced over `dim`."""
    selected = torch.where(mask.bool(), values, torch.zeros_like(values))
    return selected.sum() if dim is None else selected.sum(dim)


def masked_mean(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean over positions where `mask` is set (0 where there are none)."""
    count = mask.to(values.dtype)
    count = count.sum() if dim is None else count.sum(dim)
    return masked_sum(values, mask, dim) / count.clamp(min=1)


def masked_var(values: torch.Tensor, mask: torch.Tensor, unbiased: bool = True) -> torch.Tensor:
    """Variance (scalar) of the valid positions; `unbiased` uses Bessel's correction."""
    mean = masked_mean(values, mask)
    count = mask.to(values.dtype).sum()
    squares = masked_sum((values - mean) ** 2, mask)
    return squares / ((count - 1) if unbiased else count).clamp(min=1)


def masked_whiten(
    values: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True, epsilon: float = 1e-8
) -> torch.Tensor:
    """(values - mean) / sqrt(var + epsilon) over the valid positions; padding comes out 0.

    With `shift_mean=False` the mean is added back (only the scale is normalised).
    Returns a tensor of the shape and dtype of `values`.
    """
    mean, var = masked_mean(values, mask), masked_var(values, mask)
    whitened = (values - mean) * torch.rsqrt(var + epsilon)
    if not shift_mean:
        whitened = whitened + mean
    return torch.where(mask.bool(), whitened, torch.zeros_like(whitened))


def masked_stats(values: torch.Tensor, mask: torch.Tensor, prefix: str) -> dict[str, float]:
    """`{prefix}/mean|max|min` of the valid positions as plain floats (0.0 when none)."""
    valid = values.detach()[mask.bool()]
    if valid.numel() == 0:
        return {f"{prefix}/mean": 0.0, f"{prefix}/max": 0.0, f"{prefix}/min": 0.0}
    return {
        f"{prefix}/mean": float(valid.mean()),
        f"{prefix}/max": float(valid.max()),
        f"{prefix}/min": float(valid.min()),
    }
