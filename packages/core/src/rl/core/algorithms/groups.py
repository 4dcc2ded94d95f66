"""Groups of responses to the same prompt, identified by prompt uid (not by position)."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def group_index(uids: Sequence[object] | torch.Tensor) -> torch.Tensor:
    """Dense group ids [B] (long) from per-row prompt uids of any hashable type."""
    if isinstance(uids, torch.Tensor):
        return torch.unique(uids, return_inverse=True)[1].long()
    ids: dict[object, int] = {}
    return torch.tensor([ids.setdefault(uid, len(ids)) for uid in uids], dtype=torch.long)


def group_sum_count(
    values: torch.Tensor, groups: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-group sum and size of `values` [B]: two tensors [num_groups]."""
    num = int(groups.max()) + 1 if groups.numel() else 0
    sums = torch.zeros(num, dtype=values.dtype, device=values.device).index_add_(0, groups, values)
    counts = torch.zeros(num, dtype=values.dtype, device=values.device).index_add_(
        0, groups, torch.ones_like(values)
    )
    return sums, counts


def group_mean_std(values: torch.Tensor, groups: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row mean and unbiased std of its group [B]; a group of one has mean 0, std 1."""
    sums, counts = group_sum_count(values, groups)
    mean = sums / counts
    squares = torch.zeros_like(sums).index_add_(0, groups, (values - mean[groups]) ** 2)
    std = torch.sqrt(squares / (counts - 1).clamp(min=1))
    single = counts[groups] < 2
    row_mean = torch.where(single, torch.zeros_like(values), mean[groups])
    row_std = torch.where(single, torch.ones_like(values), std[groups])
    return row_mean, row_std
