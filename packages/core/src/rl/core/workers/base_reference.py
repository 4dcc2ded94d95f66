"""The reference role of a LoRA actor: the actor's own model with its adapters off.

With `model.lora_rank` > 0 the reference policy is the base model (verl: the actor with
`disable_adapter()`), and the actor engine holds it already: no second copy is built. A
worker whose actor engine `has_adapters` (`HasAdapters`) hosts this view as "ref"; the
controller calls it as any reference engine.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import torch

from rl.core.engines import LogprobOutput, LossFn, TrainEngine


class BaseReference(TrainEngine):
    """`TrainEngine` "ref" over a LoRA actor engine: its base model's log-probs."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    @classmethod
    def from_spec(cls, *args: Any, **kwargs: Any) -> BaseReference:
        raise TypeError("BaseReference is built from the actor engine (BaseReference(actor))")

    def compute_logprobs(
        self, batch: Mapping[str, Any], calculate_entropy: bool = True
    ) -> LogprobOutput:
        output: LogprobOutput = self.actor.compute_base_logprobs(batch, calculate_entropy)
        return output

    def compute_values(self, batch: Mapping[str, Any]) -> torch.Tensor:
        raise TypeError("the reference computes no values")

    def train_step(self, batch: Mapping[str, Any], loss_fn: LossFn) -> dict[str, float]:
        raise TypeError("the reference is not trained")

    def export_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        raise TypeError("the LoRA reference shares the actor's base weights; export the actor's")

    def load_weights(self, named_tensors: Iterator[tuple[str, torch.Tensor]]) -> None:
        """Nothing to load: the reference is the actor's base weights, whatever they are
        (a warm start that loads the actor loads them)."""
        for _ in named_tensors:
            pass

    def save(self, path: str) -> None:
        """Nothing of its own to save (the actor's checkpoint holds the base weights)."""

    def load(self, path: str) -> None:
        """Nothing of its own to load."""
