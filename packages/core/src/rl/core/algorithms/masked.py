"""Masked reductions: positions where the mask is 0 never contribute to a statistic.

`values` is any float tensor and `mask` a tensor of the same shape (bool, or float
0/1). Padded positions are selected away with `torch.where` rather than multiplied
by 0, so a NaN or inf sitting in padding cannot leak into the result.

Means, variances and whitening are computed in float64 and returned in the dtype of
`values`: float32 squares overflow from |x| near 1.8e19, and float32 sums over a large
batch lose the digits that whitening divides by.
"""

from __future__ import annotations

import torch


def masked_sum(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Sum of `values` where `mask` is set: a scalar, or reduced over `dim`."""
    selected = torch.where(mask.bool(), values, torch.zeros_like(values))
    return selected.sum() if dim is None else selected.sum(dim)


def masked_mean(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean over positions where `mask` is set (0 where there are none)."""
    return _mean64(values, mask, dim).to(values.dtype)


def masked_var(values: torch.Tensor, mask: torch.Tensor, unbiased: bool = True) -> torch.Tensor:
    """Variance (scalar) of the valid positions; `unbiased` uses Bessel's correction."""
    return _var64(values.to(torch.float64), mask, unbiased).to(values.dtype)


def _mean64(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    wide = values.to(torch.float64)
    count = mask.to(torch.float64)
    count = count.sum() if dim is None else count.sum(dim)
    return masked_sum(wide, mask, dim) / count.clamp(min=1)


def _var64(wide: torch.Tensor, mask: torch.Tensor, unbiased: bool) -> torch.Tensor:
    mean = _mean64(wide, mask)
    count = mask.to(torch.float64).sum()
    squares = masked_sum((wide - mean) ** 2, mask)
    return squares / ((count - 1) if unbiased else count).clamp(min=1)


def masked_whiten(
    values: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True, epsilon: float = 1e-8
) -> torch.Tensor:
    """(values - mean) / sqrt(var + epsilon) over the valid positions; padding comes out 0.

    With `shift_mean=False` the mean is added back (only the scale is normalised).
    Returns a tensor of the shape and dtype of `values`.
    """
    wide = values.to(torch.float64)
    mean, var = _mean64(wide, mask), _var64(wide, mask, unbiased=True)
    whitened = (wide - mean) * torch.rsqrt(var + epsilon)
    if not shift_mean:
        whitened = whitened + mean
    whitened = whitened.to(values.dtype)
    return torch.where(mask.bool(), whitened, torch.zeros_like(whitened))


def masked_stats(values: torch.Tensor, mask: torch.Tensor, prefix: str) -> dict[str, float]:
    """`{prefix}/mean|max|min` of the valid positions as plain floats (0.0 when none)."""
    valid = values.detach()[mask.bool()]
    if valid.numel() == 0:
        return {f"{prefix}/mean": 0.0, f"{prefix}/max": 0.0, f"{prefix}/min": 0.0}
    return {
        f"{prefix}/mean": float(valid.to(torch.float64).mean()),
        f"{prefix}/max": float(valid.max()),
        f"{prefix}/min": float(valid.min()),
    }
