"""Degenerate and non-finite reward statistics of a batch, as step metrics.

A group estimator (grpo, rloo, reinforce_plus_plus_baseline) learns nothing from a group
whose scores are all equal, and a non-finite score poisons its group's statistics. Both
are counted here, so a run shows them instead of training on zeros or NaNs in silence.
"""

from __future__ import annotations

import torch

# the estimators whose baseline is the other responses to the same prompt
GROUP_ESTIMATORS = ("grpo", "rloo", "reinforce_plus_plus_baseline")


def score_statistics(scores: torch.Tensor, groups: torch.Tensor) -> dict[str, float]:
    """Counts over one batch of sequence scores [S] and their dense prompt groups [S].

    Returns:
        reward/nonfinite_count: sequences whose score is NaN or +-inf.
        reward/zero_std_groups, reward/zero_std_group_frac: groups of two or more
            responses whose scores are all equal (finite), as a count and as a share of
            such groups; both absent when no group has two responses (rollout.n = 1).
    """
    wide = scores.detach().to(torch.float64)
    groups = groups.to(wide.device)
    finite = torch.isfinite(wide)
    metrics = {"reward/nonfinite_count": float((~finite).sum())}
    if wide.numel() == 0:
        return metrics
    size = int(groups.max()) + 1
    counts = groups.new_zeros(size).index_add(0, groups, torch.ones_like(groups))
    broken = groups.new_zeros(size).index_add(0, groups, (~finite).long())
    safe = torch.where(finite, wide, torch.zeros_like(wide))
    high = wide.new_full((size,), -torch.inf)
    low = wide.new_full((size,), torch.inf)
    high = high.scatter_reduce(0, groups, safe, "amax")
    low = low.scatter_reduce(0, groups, safe, "amin")
    multi = counts >= 2
    if not bool(multi.any()):
        return metrics
    flat = multi & (broken == 0) & (high == low)
    metrics["reward/zero_std_groups"] = float(flat.sum())
    metrics["reward/zero_std_group_frac"] = float(flat.sum()) / float(multi.sum())
    return metrics


def nonfinite_count(values: torch.Tensor, mask: torch.Tensor) -> float:
    """How many valid positions (`mask` set) of `values` are NaN or +-inf."""
    return float((~torch.isfinite(values.detach()) & mask.bool()).sum())
