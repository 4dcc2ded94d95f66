"""How a worker group splits calls over its ranks and puts the answers back together.

Pure functions over `Batch`es and lists, shared by every launcher:

- forward passes (log-probs, values) scatter the rows over the data-parallel ranks,
  balanced by tokens, and gather the answers in the caller's row order;
- updates broadcast the whole batch: each rank's engine takes its share of every
  mini-batch itself (`data_parallel_rows`), so the loss is normalised by the global
  mini-batch and the mini-batches are the ones a single rank would have drawn;
- generation spreads the prompts × n rows over rollout replicas, contiguous or (ChatLearn's
  `data_rerank`) round-robin so the n samples of one prompt land on different replicas.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from rl.core.batch import Batch, select
from rl.core.config import ConfigError


def data_parallel_rows(attention_mask: torch.Tensor, world_size: int) -> list[torch.Tensor]:
    """Row indices (ascending) of each rank's share: equal row counts, balanced tokens.

    Every rank must run the same number of forward/backward passes (FSDP collectives),
    so the rows divide evenly; `attention_mask` [B, L] gives each row's token count.
    """
    rows = attention_mask.shape[0]
    if rows % world_size:
        raise ConfigError(
            f"a batch of {rows} rows cannot be split evenly over {world_size} data-parallel "
            "ranks: make data.train_batch_size × rollout.n and the mini-batches "
            "(ppo_mini_batch_size × rollout.n) multiples of the rank count"
        )
    if world_size == 1:
        return [torch.arange(rows)]
    from rl.kernels import karmarkar_karp

    lengths = attention_mask.sum(1).tolist()
    parts = karmarkar_karp([float(n) for n in lengths], world_size, equal_size=True)
    return [torch.tensor(part, dtype=torch.long) for part in parts]


def scatter_rows(batch: Mapping[str, Any], world_size: int) -> list[tuple[torch.Tensor, Batch]]:
    """(row indices, sub-batch) of each rank for a forward pass."""
    parts = data_parallel_rows(batch["attention_mask"], world_size)
    return [(rows, select(batch, rows)) for rows in parts]


def gather_rows(
    parts: Sequence[torch.Tensor], answers: Sequence[torch.Tensor | None], total: int
) -> torch.Tensor | None:
    """One [total, ...] tensor from per-rank answers for `parts` rows (None stays None)."""
    if answers[0] is None:
        return None
    first = answers[0]
    out = torch.zeros((total, *first.shape[1:]), dtype=first.dtype)
    for rows, answer in zip(parts, answers, strict=True):
        assert answer is not None, "every rank answers alike"
        out[rows] = answer
    return out


def mean_metrics(per_rank: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Each metric averaged over the ranks that report it (as verl reduces them)."""
    sums: dict[str, list[float]] = {}
    for metrics in per_rank:
        for key, value in metrics.items():
            sums.setdefault(key, []).append(float(value))
    return {key: sum(values) / len(values) for key, values in sums.items()}


def spread_rows(num_rows: int, world_size: int, rerank: bool) -> list[list[int]]:
    """Which generation rows (prompt i's n samples are rows i*n .. i*n+n-1) each replica
    runs: contiguous blocks, or round-robin with `rerank` (ChatLearn's `data_rerank`)."""
    if rerank:
        return [list(range(rank, num_rows, world_size)) for rank in range(world_size)]
    base, extra = divmod(num_rows, world_size)
    out, start = [], 0
    for rank in range(world_size):
        size = base + (rank < extra)
        out.append(list(range(start, start + size)))
        start += size
    return out
