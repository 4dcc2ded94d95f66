"""ROLL's sample masks: responses left out of the loss (and of advantage whitening) while
still counting in their group's reward statistics.

- `max_len_mask`: a response that used all `max_length` tokens was cut, its reward says
  little about it: masked when its length equals the limit.
- `difficulty_mask`: a prompt whose responses' mean accuracy is at or below `low`, or at or
  above `high`, is too hard or too easy to teach anything: all its responses masked (the
  bounds are exclusive: ROLL keeps `low < mean < high`).

Each returns a float mask [rows], 1 kept, 0 masked.
"""

from __future__ import annotations

import torch


def max_len_mask(lengths: torch.Tensor, max_length: int) -> torch.Tensor:
    """1 where a response is shorter than `max_length` tokens."""
    return (lengths != max_length).float()


def difficulty_mask(
    accuracy: torch.Tensor, group_index: torch.Tensor, low: float, high: float
) -> torch.Tensor:
    """1 where the response's group (prompt) has a mean accuracy strictly between `low`
    and `high`."""
    groups = int(group_index.max()) + 1 if group_index.numel() else 0
    totals = torch.zeros(groups, dtype=torch.float64).index_add_(0, group_index, accuracy.double())
    counts = torch.zeros(groups, dtype=torch.float64).index_add_(
        0, group_index, torch.ones_like(accuracy, dtype=torch.float64)
    )
    means = (totals / counts)[group_index]
    return ((means > low) & (means < high)).float()
