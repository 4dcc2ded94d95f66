"""Test helpers shared by the in-process tests and the multi-process workers."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from rl.core.config import load_config
from rl.core.models import load_causal_lm, load_tokenizer


class BufferingEngine:
    """A rollout-engine stand-in that, like vLLM's in-place reload, keeps every view it
    is given until the stream ends and only then copies them into its model: a sender
    that reused a bucket under it would corrupt the earlier views."""

    def __init__(self, model: torch.nn.Module | None = None) -> None:
        self.model = model
        self.extras: dict[str, torch.Tensor] = {}
        self.calls = 0
        self.names: list[str] = []

    def update_weights(self, named_tensors: Iterator[tuple[str, torch.Tensor]]) -> None:
        self.calls += 1
        held = list(named_tensors)
        params = dict(self.model.state_dict()) if self.model is not None else {}
        for name, tensor in held:
            self.names.append(name)
            if name in params:
                params[name].copy_(tensor)
            else:
                self.extras[name] = tensor.clone()


def tiny_model(seed: int) -> torch.nn.Module:
    """The repo's tiny random Qwen2 (fp32, no download)."""
    config = load_config()
    return load_causal_lm(config.model, load_tokenizer(config.model), seed=seed)
