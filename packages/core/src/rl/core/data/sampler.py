"""`PromptSampler`: batches of prompt indices, epoch after epoch, resumable exactly."""

from __future__ import annotations

from typing import Any

import torch

from rl.core.errors import ConfigError


class PromptSampler:
    """A fresh permutation per epoch from (seed, epoch); the position is checkpointed, so a
    resumed run draws exactly the batches an uninterrupted one would have drawn."""

    def __init__(
        self,
        num_items: int,
        batch_size: int,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = True,
    ) -> None:
        if num_items < batch_size and drop_last:
            raise ConfigError(
                f"the training set has {num_items} prompts, fewer than data.train_batch_size "
                f"= {batch_size}"
            )
        self.num_items, self.batch_size = num_items, batch_size
        self.shuffle, self.seed, self.drop_last = shuffle, seed, drop_last
        self.epoch, self.position = 0, 0

    @property
    def steps_per_epoch(self) -> int:
        full, rest = divmod(self.num_items, self.batch_size)
        return full + (0 if self.drop_last or rest == 0 else 1)

    def _order(self, epoch: int) -> list[int]:
        if not self.shuffle:
            return list(range(self.num_items))
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        return torch.randperm(self.num_items, generator=generator).tolist()

    def next_batch(self) -> list[int]:
        """The next batch of indices (moving on to a new epoch when this one is used up)."""
        if self.position >= self.steps_per_epoch:
            self.epoch, self.position = self.epoch + 1, 0
        start = self.position * self.batch_size
        self.position += 1
        return self._order(self.epoch)[start : start + self.batch_size]

    def state_dict(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "position": self.position,
            "seed": self.seed,
            "num_items": self.num_items,
            "batch_size": self.batch_size,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if (state["num_items"], state["batch_size"]) != (self.num_items, self.batch_size):
            raise ConfigError(
                f"the checkpoint's sampler saw {state['num_items']} prompts in batches of "
                f"{state['batch_size']}, this run has {self.num_items} in batches of "
                f"{self.batch_size}: resume with the same data and data.train_batch_size"
            )
        self.epoch, self.position = state["epoch"], state["position"]
