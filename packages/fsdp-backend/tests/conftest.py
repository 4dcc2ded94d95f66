"""`step_gradients(engine)`: the gradients an engine's optimizer steps applied, for tests
that compare them (the FSDP engine releases `.grad` when its `train_step` ends)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch


def _full(tensor: torch.Tensor) -> torch.Tensor:
    """The whole tensor: FSDP2's DTensors gathered (plain tensors at one rank in fp32)."""
    return tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor


@contextmanager
def _step_gradients(engine) -> Iterator[dict[str, torch.Tensor]]:
    """Yields a dict that holds, by parameter name, the whole gradient each optimizer step
    was about to apply (the last step's, where a train step makes several)."""
    seen: dict[str, torch.Tensor] = {}

    def before_step(optimizer, args, kwargs):
        seen.clear()
        for name, p in engine.model.named_parameters():
            if p.grad is not None:
                seen[name] = _full(p.grad).detach().clone()

    handle = engine.training.optimizer.register_step_pre_hook(before_step)
    try:
        yield seen
    finally:
        handle.remove()


@pytest.fixture
def step_gradients():
    return _step_gradients
