"""Groups of responses to the same prompt, identified by prompt uid — never by position.

Rollouts may be reordered (sequence balancing, async arrival, filtered groups), so
"rows 0..n-1 belong to prompt 0" is not an assumption any estimator may make.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, Protocol

import torch


class _ArrayLike(Protocol):
    def tolist(self) -> Any: ...


# A list of hashables (str, int, uuid), a numpy array, or a tensor of integer uids.
PromptUids = Sequence[Hashable] | torch.Tensor | _ArrayLike


def prompt_uids(step: int, prompts: Sequence[int], n: int, draw: int | None = None) -> list[str]:
    """The one way groups are named: the prompt uid of each response row of a generation
    in which prompt `prompts[i]` (its index in the dataset) has the `n` rows i*n .. i*n+n-1.
    A step's prompts are `{step}-{prompt}`; under dynamic sampling, the prompts of draw `d`
    are `{step}-{d}-{prompt}` (a prompt drawn twice in one step makes two groups)."""
    tag = f"{step}-" if draw is None else f"{step}-{draw}-"
    return [f"{tag}{prompt}" for prompt in prompts for _ in range(n)]


def group_rows(group: int, n: int) -> range:
    """The rows of the `group`-th prompt of a generation of `n` responses per prompt."""
    return range(group * n, group * n + n)


def group_index(prompt_uid: PromptUids) -> torch.Tensor:
    """Dense group ids, long [N], from per-sequence prompt uids of any hashable type.

    Equal uids get equal ids; ids are 0..G-1. Tensors stay on their device.
    """
    if isinstance(prompt_uid, torch.Tensor):
        return torch.unique(prompt_uid, return_inverse=True)[1].long().reshape(-1)
    # numpy arrays become plain Python values, so np.str_("a") and "a" are one uid
    uids = prompt_uid if isinstance(prompt_uid, Sequence) else prompt_uid.tolist()
    ids: dict[Hashable, int] = {}
    return torch.tensor([ids.setdefault(uid, len(ids)) for uid in uids], dtype=torch.long)


def group_sum_count(
    values: torch.Tensor, groups: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-group sum and size of `values` [N] for dense `groups` [N]: two tensors [G] in
    the dtype of `values` (pass float64 values for sums that must not overflow)."""
    size = int(groups.max()) + 1 if groups.numel() else 0
    sums = values.new_zeros(size).index_add(0, groups, values)
    counts = values.new_zeros(size).index_add(0, groups, torch.ones_like(values))
    return sums, counts


def group_mean_std(
    values: torch.Tensor, groups: torch.Tensor, ddof: int = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's group mean and group std, both [N] in the dtype of `values`.

    Computed in float64 whatever the input dtype: float32 squares overflow from |x| near
    1.8e19 (rewards near 2e19 gave an infinite std and zeroed every advantage). A std past
    float32's range comes back inf in float32; callers that divide by it should work in
    float64 themselves (`grpo` does).

    ddof: 1 the unbiased (sample) std; 0 the population std (numpy's `np.std`, which
    ChatLearn's GRPO uses). With ddof 1 a group of one has no spread to compare against:
    it gets mean 0 and std 1, so its score passes through unchanged (the convention of
    verl's GRPO). With ddof 0 the formula holds for it too: its own mean and std 0.
    """
    if ddof not in (0, 1):
        raise ValueError(f"group std ddof = {ddof!r}; allowed: 0 or 1")
    wide = values.to(torch.float64)
    sums, counts = group_sum_count(wide, groups)
    mean = sums / counts
    squares = torch.zeros_like(sums).index_add(0, groups, (wide - mean[groups]) ** 2)
    std = torch.sqrt(squares / (counts - ddof).clamp(min=1))
    if ddof == 0:
        return mean[groups].to(values.dtype), std[groups].to(values.dtype)
    single = counts[groups] < 2
    row_mean = torch.where(single, torch.zeros_like(wide), mean[groups])
    row_std = torch.where(single, torch.ones_like(wide), std[groups])
    return row_mean.to(values.dtype), row_std.to(values.dtype)
