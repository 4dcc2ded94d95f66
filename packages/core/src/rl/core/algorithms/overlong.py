"""DAPO's overlong reward shaping (verl's DAPORewardManager, the DAPO paper's "soft overlong
punishment"): a response longer than `max_len - buffer_len` tokens loses reward linearly,
down to `-penalty_factor` at `max_len`; shorter ones lose nothing."""

from __future__ import annotations

import torch


def overlong_penalty(
    lengths: torch.Tensor, max_len: int, buffer_len: int, penalty_factor: float
) -> torch.Tensor:
    """`min(-(L - (max_len - buffer_len)) / buffer_len * penalty_factor, 0)` for each
    response length L (its token count, [B] integers) -> float64 [B], each <= 0."""
    if buffer_len <= 0:
        raise ValueError(f"buffer_len must be positive, got {buffer_len}")
    exceed = lengths.to(torch.float64) - (max_len - buffer_len)
    return (-exceed / buffer_len * penalty_factor).clamp(max=0.0)
