"""The mini-batches of a train step, and which rows of each go into each micro-batch.

`mini_batches` yields the `ppo_epochs` passes of mini-batches (one optimizer step each),
shuffled or in order. Micro-batches are by row count or by token budget:

With a token budget (`use_dynamic_bsz`), rows are partitioned by `rl.kernels`' balanced
partitioner so that no micro-batch holds more than `max_tokens` real tokens (prompt +
response) and their workloads are even; the heaviest micro-batch runs first, so a budget
that is too large fails at once rather than at the end. Data-parallel ranks agree on
the number of micro-batches (the max over ranks), so every rank steps together.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from rl.core.batch import batch_size, select
from rl.core.errors import ConfigError


@dataclass(frozen=True)
class Rows:
    """Prompts × n → rows: the one place a step's prompts become its responses (every
    other count of rows reads it: the plan, the launch checks, the engines' mini-batches,
    the old-log-prob shortcut)."""

    prompts: int  # data.train_batch_size
    n: int  # rollout.n (1 for SFT)
    mini_batch_size: int  # prompts per optimizer step

    @classmethod
    def of(cls, config: Any, section: Any, n: int | None = None) -> Rows:
        """The rows of a role whose keys are `section` (`config.actor`, `config.critic`, or
        SFT's), `n` responses per prompt (`rollout.n` unless given)."""
        n = config.rollout.n if n is None else n
        return cls(config.data.train_batch_size, n, section.ppo_mini_batch_size)

    @property
    def rows(self) -> int:
        """Responses per step."""
        return self.prompts * self.n

    @property
    def rows_per_mini(self) -> int:
        """Responses per optimizer step."""
        return self.mini_batch_size * self.n

    def check_split(self, dp: int, role: str) -> None:
        """Refuse a step or a mini-batch whose rows do not split evenly over `dp`
        data-parallel ranks, naming the key to change."""
        for key, size in (
            ("data.train_batch_size", self.prompts),
            (f"{role}.ppo_mini_batch_size", self.mini_batch_size),
        ):
            if size * self.n % dp:
                raise ConfigError(
                    f"{key} = {size}: × rollout.n ({self.n}) = {size * self.n} rows do not "
                    f"split evenly over {dp} data-parallel ranks; use a multiple of "
                    f"{dp // math.gcd(self.n, dp)}"
                )


def mini_batches(
    batch: Mapping[str, torch.Tensor],
    size: int,
    epochs: int,
    shuffle: bool,
    generator: torch.Generator,
) -> Iterator[dict[str, torch.Tensor]]:
    """`epochs` passes over `batch` in mini-batches of `size` rows, each pass in a fresh
    order drawn from `generator` when `shuffle` (every data-parallel rank draws the same)."""
    rows = batch_size(batch)
    for _ in range(epochs):
        order = torch.randperm(rows, generator=generator) if shuffle else torch.arange(rows)
        for start in range(0, rows, size):
            yield select(batch, order[start : start + size])


@dataclass(frozen=True)
class MicroBatching:
    """How to cut a batch: `rows` per micro-batch, or (when `max_tokens` is set) at most
    `max_tokens` real tokens per micro-batch. `key` names the config key of the budget."""

    rows: int = 8
    max_tokens: int | None = None
    key: str = "ppo_max_token_len_per_gpu"


def micro_batch_rows(
    attention_mask: torch.Tensor, spec: MicroBatching, group: dist.ProcessGroup | None = None
) -> list[torch.Tensor]:
    """Row indices (int64, ascending) of each micro-batch of the batch whose attention mask
    is `attention_mask` [B, L]; together they cover every row exactly once."""
    num_rows = attention_mask.shape[0]
    if spec.max_tokens is None:
        return [
            torch.arange(start, min(start + spec.rows, num_rows))
            for start in range(0, num_rows, spec.rows)
        ]
    from rl.kernels import token_budget_partition

    lengths = attention_mask.sum(1).tolist()
    parts = token_budget_partition(lengths, spec.max_tokens, key=spec.key)
    wanted = _max_over_ranks(len(parts), group)
    if wanted > len(parts):
        parts = token_budget_partition(lengths, spec.max_tokens, min_parts=wanted, key=spec.key)
    return [torch.tensor(part, dtype=torch.long) for part in parts]


def _max_over_ranks(count: int, group: dist.ProcessGroup | None) -> int:
    if not dist.is_available() or not dist.is_initialized() or dist.get_world_size(group) == 1:
        return count
    value = torch.tensor([count], dtype=torch.long)
    if dist.get_backend(group) == "nccl":
        value = value.cuda()
    dist.all_reduce(value, op=dist.ReduceOp.MAX, group=group)
    return int(value.item())
