"""`DomainSampler`: batches with a fixed number of prompts from each reward domain, as ROLL
mixes them (`data.domain_interleave_probs`).

ROLL gives each domain `int(p * batch_size)` prompts of every batch, and the last domain
listed the rest, each drawn by a scheduler of its own that walks that domain's prompts
epoch after epoch; a batch is the domains' prompts one domain after another, in the order
listed. Here each domain has its own `PromptSampler` (its seed offset by the domain's place
in the list) over its own prompts, so a domain's epochs do not wait for the others'; its
position is in the checkpoint, and a resumed run draws the batches an uninterrupted one
would. A domain whose share rounds down to no prompt is never drawn (as in ROLL).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rl.core.data.sampler import PromptSampler
from rl.core.errors import ConfigError

KEY = "data.domain_interleave_probs"


def domain_batch_sizes(probs: Mapping[str, float], batch_size: int) -> dict[str, int]:
    """ROLL's split of `batch_size` prompts: `int(p * batch_size)` for each domain but the
    last, which takes what is left."""
    names, sizes, taken = list(probs), {}, 0
    for position, name in enumerate(names):
        size = batch_size - taken if position == len(names) - 1 else int(probs[name] * batch_size)
        sizes[name], taken = size, taken + size
    return sizes


class DomainSampler:
    """Batches of prompt indices with `domain_batch_sizes` prompts of each domain."""

    def __init__(
        self,
        domains: Sequence[str],
        probs: Mapping[str, float],
        batch_size: int,
        shuffle: bool = True,
        seed: int = 0,
    ) -> None:
        bad = {name: p for name, p in probs.items() if not 0 <= p <= 1}
        if bad:
            raise ConfigError(f"{KEY}: shares must be in [0, 1], got {bad}")
        self.sizes = domain_batch_sizes(probs, batch_size)
        if self.sizes and min(self.sizes.values()) < 0:
            raise ConfigError(
                f"{KEY} = {dict(probs)} share more than the whole batch ({batch_size} prompts): "
                f"the domains before the last take {batch_size - list(self.sizes.values())[-1]}"
            )
        self.batch_size, self.num_items = batch_size, len(domains)
        self.members: dict[str, list[int]] = {name: [] for name in probs}
        for index, domain in enumerate(domains):
            if domain in self.members:
                self.members[domain].append(index)
        self.samplers: dict[str, PromptSampler] = {}
        for position, (name, size) in enumerate(self.sizes.items()):
            if size == 0:
                continue
            if len(self.members[name]) < size:
                raise ConfigError(
                    f"{KEY}: domain {name!r} has {len(self.members[name])} prompts in the "
                    f"training data, fewer than the {size} of each batch its share "
                    f"{probs[name]} gives (of data.train_batch_size = {batch_size})"
                )
            self.samplers[name] = PromptSampler(
                len(self.members[name]), size, shuffle=shuffle, seed=seed + position
            )

    @property
    def steps_per_epoch(self) -> int:
        """Steps until every drawn domain has been seen whole at least once."""
        return max(s.steps_per_epoch for s in self.samplers.values())

    def next_batch(self) -> list[int]:
        return [
            self.members[name][local]
            for name, sampler in self.samplers.items()
            for local in sampler.next_batch()
        ]

    def state_dict(self) -> dict[str, Any]:
        return {"domains": {name: s.state_dict() for name, s in self.samplers.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = state.get("domains")
        if saved is None or set(saved) != set(self.samplers):
            had = sorted(saved) if saved is not None else "one mixed sampler"
            raise ConfigError(
                f"the checkpoint drew its batches by domain from {had}, this run from "
                f"{sorted(self.samplers)} ({KEY}): resume with the same domains"
            )
        for name, sampler in self.samplers.items():
            sampler.load_state_dict(saved[name])
