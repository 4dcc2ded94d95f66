"""Checks on the weights the trainer sends, before vLLM sees them.

vLLM's own errors for a bad name or shape point at its fused modules
('no module named layers.9', an assert on qkv_proj); these name the tensor the
trainer sent, in Hugging Face terms, and the expected shape.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator

import torch


class WeightTable:
    """The Hugging Face parameter names and shapes the engine's model expects."""

    def __init__(self, shapes: dict[str, tuple[int, ...]]) -> None:
        self.shapes = shapes

    @classmethod
    def from_hf_config(cls, hf_config: object, trust_remote_code: bool = False) -> WeightTable:
        """Build the model on the meta device (no memory) and read its state dict."""
        from transformers import AutoModelForCausalLM

        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(hf_config, trust_remote_code=trust_remote_code)
        return cls({name: tuple(t.shape) for name, t in model.state_dict().items()})

    def checked(
        self, named_tensors: Iterator[tuple[str, torch.Tensor]]
    ) -> Iterator[tuple[str, torch.Tensor]]:
        """Yield the pairs unchanged; raise ValueError naming the first bad one."""
        seen: set[str] = set()
        for name, tensor in named_tensors:
            expected = self.shapes.get(name)
            if expected is None:
                raise ValueError(self._unknown(name))
            if tuple(tensor.shape) != expected:
                raise ValueError(
                    f"weight sync: {name!r} has shape {tuple(tensor.shape)} but the rollout "
                    f"model expects {expected}{_PARTIAL}"
                )
            if name in seen:
                raise ValueError(f"weight sync: {name!r} was sent twice in one sync{_PARTIAL}")
            seen.add(name)
            yield name, tensor

    def _unknown(self, name: str) -> str:
        close = difflib.get_close_matches(name, list(self.shapes), n=1, cutoff=0.6)
        hint = f" (closest: {close[0]!r})" if close else ""
        return (
            f"weight sync: the trainer sent {name!r}, which the rollout model does not have"
            f"{hint}; do actor and rollout load the same model.path?{_PARTIAL}"
        )


_PARTIAL = (
    ". Weights before it were loaded: the rollout engine is partly updated until the "
    "next successful sync"
)
