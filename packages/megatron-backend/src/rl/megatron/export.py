"""An engine's weights as Hugging Face tensors: the stream the rollout sync reads
(`export_weights`), full HF-named tensors loaded back in (`load_weights`: the reference
from the actor) and a Hugging Face folder (`save_hf`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from rl.core.file_modes import save_safetensors
from rl.megatron.layouts import LayoutConverter
from rl.megatron.logprobs import unwrap
from rl.megatron.weights import export_hf, export_plan, load_hf


class HFWeights:
    """The weights of `chunks` under their Hugging Face names (`converter`); a `critic`'s
    head is `score`, and its folder loads as a token-classification model."""

    def __init__(
        self,
        chunks: list[torch.nn.Module],
        converter: LayoutConverter,
        device: torch.device,
        critic: bool,
        hf_config: Any,
    ) -> None:
        self.chunks, self.converter, self.device = chunks, converter, device
        self.critic, self.hf_config = critic, hf_config
        self._plans: list[list[tuple[str, int]]] | None = None

    def export_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        """Full tensors under their Hugging Face names, one at a time, on every rank in the
        same order (each rank feeds its rollout replica): TP shards gathered, pipeline
        stages' and expert ranks' tensors broadcast from their holder."""
        if self._plans is None:  # a collective: every rank exports together
            self._plans = [export_plan(unwrap(chunk)) for chunk in self.chunks]
        for chunk, plan in zip(self.chunks, self._plans, strict=True):
            yield from export_hf(unwrap(chunk), self.converter, self.device, plan, self.critic)

    def load_weights(self, named_tensors: Iterator[tuple[str, torch.Tensor]]) -> None:
        """Replace the weights with full HF-named tensors (the reference from the actor)."""
        tensors = list(named_tensors)
        for chunk in self.chunks:
            load_hf(unwrap(chunk), self.converter, tensors, critic=self.critic)

    def save_hf(self, path: str, tokenizer: Any = None) -> None:
        """A Hugging Face folder (safetensors, the model's config) from the exported
        weights; a critic's loads with `AutoModelForTokenClassification` (`num_labels` 1)."""
        tensors = {name: t.cpu().contiguous() for name, t in self.export_weights()}
        if dist.get_rank() == 0:
            folder = Path(path)
            folder.mkdir(parents=True, exist_ok=True)
            hf_config = self.hf_config
            if self.critic:
                hf_config = copy.deepcopy(hf_config)
                hf_config.num_labels = 1
                hf_config.architectures = [token_classification_class(hf_config)]
            hf_config.save_pretrained(folder)
            save_safetensors(tensors, folder / "model.safetensors", {"format": "pt"})
            if tokenizer is not None:
                tokenizer.save_pretrained(folder)
        dist.barrier()


def token_classification_class(hf_config: Any) -> str:
    """`Qwen2ForCausalLM` -> `Qwen2ForTokenClassification` (what a critic folder loads as)."""
    causal = (hf_config.architectures or [f"{hf_config.model_type.title()}ForCausalLM"])[0]
    return causal.replace("ForCausalLM", "ForTokenClassification")
