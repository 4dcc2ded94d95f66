"""The batch container: a dict of tensors sharing their first (row) dimension.

Keys follow `rl.core.engines.BATCH_KEYS`. Non-tensor per-row data (prompt
uids, texts, ground truths) travels beside it in plain lists.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import torch

Batch = dict[str, torch.Tensor]


def batch_size(batch: Mapping[str, torch.Tensor]) -> int:
    sizes = {key: value.shape[0] for key, value in batch.items()}
    if len(set(sizes.values())) != 1:
        raise ValueError(f"batch tensors disagree on the number of rows: {sizes}")
    return next(iter(sizes.values()))


def select(batch: Mapping[str, torch.Tensor], indices: torch.Tensor | Sequence[int]) -> Batch:
    """Rows `indices` of every tensor."""
    index = torch.as_tensor(indices, dtype=torch.long)
    return {key: value.index_select(0, index.to(value.device)) for key, value in batch.items()}


def split(batch: Mapping[str, torch.Tensor], size: int) -> Iterator[Batch]:
    """Consecutive chunks of at most `size` rows."""
    total = batch_size(batch)
    for start in range(0, total, size):
        yield {key: value[start : start + size] for key, value in batch.items()}


def concat(batches: Sequence[Mapping[str, torch.Tensor]]) -> Batch:
    keys = batches[0].keys()
    return {key: torch.cat([b[key] for b in batches]) for key in keys}


def to_device(batch: Mapping[str, torch.Tensor], device: torch.device | str) -> Batch:
    return {key: value.to(device) for key, value in batch.items()}
