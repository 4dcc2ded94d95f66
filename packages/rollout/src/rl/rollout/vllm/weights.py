"""Checks on the weights the trainer sends, before vLLM sees them, and the tied output
layer after they are loaded.

vLLM's own errors for a bad name or shape point at its fused modules
('no module named layers.9', an assert on qkv_proj); these name the tensor the
trainer sent, in Hugging Face terms, and the expected shape.

Tied word embeddings: vLLM's Qwen2 / Qwen3 / Llama loaders skip `lm_head.weight` when
the config ties it (the head holds the embedding's parameter). Its in-place reload,
though, rebuilds only the layers whose weights arrived: on the CPU backend the head's
packed GEMM weight (`process_weights_after_loading`) stayed that of the old embedding,
and log-probs drifted from the trainer's (measured: 0.39 after the first sync of a tied
Qwen2, 73 after a change of the embedding alone). `refresh_tied_layers` rebuilds it
where a head keeps a packed copy; on the CPU backend none does (`lean_vocab_layers`).
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Iterator

import torch

from rl.core.weight_sync.ties import TieCheck, Ties


class WeightTable:
    """The Hugging Face parameter names and shapes the engine's model expects."""

    def __init__(self, shapes: dict[str, tuple[int, ...]], ties: Ties | None = None) -> None:
        self.shapes = shapes
        self.ties = TieCheck(ties or Ties())

    @classmethod
    def from_hf_config(cls, hf_config: object, trust_remote_code: bool = False) -> WeightTable:
        """Build the model on the meta device (no memory) and read its state dict (a
        tied tensor under both names) and its ties."""
        from transformers import AutoModelForCausalLM

        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(hf_config, trust_remote_code=trust_remote_code)
        shapes = {name: tuple(t.shape) for name, t in model.state_dict().items()}
        return cls(shapes, Ties.of(model))

    @property
    def tied_loaded(self) -> bool:
        """Whether the last sync loaded a tied tensor (the embedding of a tied model)."""
        return bool(self.ties.loaded)

    def checked(
        self, named_tensors: Iterator[tuple[str, torch.Tensor]]
    ) -> Iterator[tuple[str, torch.Tensor]]:
        """Yield the pairs unchanged but a tied alias (`lm_head.weight` of a tied model:
        vLLM skips it, so it is checked against the embedding instead, `TieCheck`);
        raise ValueError naming the first bad one."""
        return self.ties.stream(self._checked(named_tensors))

    def _checked(
        self, named_tensors: Iterator[tuple[str, torch.Tensor]]
    ) -> Iterator[tuple[str, torch.Tensor]]:
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


def lean_vocab_layers(worker: object) -> int:
    """In a vLLM worker (`collective_rpc`), on the CPU backend: keep one copy of each
    vocabulary matrix; returns how many layers changed.

    vLLM's CPU backend gives every vocabulary layer a packed GEMM copy of its [V, H]
    weight beside the weight itself (`dispatch_cpu_unquantized_gemm(remove_weight=False)`),
    and makes it again at each in-place reload. The input embedding only looks rows up:
    its copy is never read (519 MiB at Qwen2.5's vocabulary in fp32). A tied head's copy
    is a second one of the embedding, and went stale at each reload. Here each layer's
    method is swapped for one that packs nothing (`vocab_methods`, also at later reloads):
    the embedding keeps its rows and every head multiplies its live weight itself
    (`narrow_product`: weight @ x^T in blocks of weight rows, 1.3x the packed product's
    time at 32 rows and Qwen2.5's head on 2 AMD EPYC cores; `python -m
    rl.rollout.bench.narrow_linear`). On GPU (no `cpu_linear`) nothing changes."""
    from vllm.model_executor.layers.vocab_parallel_embedding import (
        ParallelLMHead,
        UnquantizedEmbeddingMethod,
        VocabParallelEmbedding,
    )

    lookup, head = vocab_methods()
    model = worker.model_runner.get_model()  # type: ignore[attr-defined]
    changed = 0
    for module in model.modules():
        method = getattr(module, "quant_method", None)
        if not (
            isinstance(module, VocabParallelEmbedding)
            and type(method) in (UnquantizedEmbeddingMethod, lookup, head)
            and hasattr(module, "cpu_linear")
        ):
            continue
        module.quant_method = (head if isinstance(module, ParallelLMHead) else lookup)()
        module.quant_method.process_weights_after_loading(module)  # the packed copy goes
        changed += 1
    return changed


@functools.cache
def vocab_methods() -> tuple[type, type]:
    """(input embedding's, head's) unquantized methods that pack no copy on CPU (vLLM's
    own classes otherwise, defined here once vLLM is importable)."""
    from vllm.model_executor.layers.vocab_parallel_embedding import UnquantizedEmbeddingMethod

    from rl.rollout.narrow_linear import narrow_product

    class LookupOnlyEmbedding(UnquantizedEmbeddingMethod):  # type: ignore[misc]
        """An input embedding: rows looked up, never multiplied; no packed copy."""

        def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
            layer.cpu_linear = torch.nn.functional.linear

    class LiveWeightHead(UnquantizedEmbeddingMethod):  # type: ignore[misc]
        """A vocabulary head multiplying its live weight (the embedding's, tied)."""

        def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
            layer.cpu_linear = narrow_product

    return LookupOnlyEmbedding, LiveWeightHead


def refresh_tied_layers(worker: object) -> int:
    """In a vLLM worker (`collective_rpc`): rerun `process_weights_after_loading` of each
    layer that holds another layer's weight parameter (a tied head), which the in-place
    reload leaves as it was; returns how many. On GPU the unquantized embedding method
    does nothing there, and so does a CPU head that multiplies its live weight
    (`lean_vocab_layers`)."""
    model = worker.model_runner.get_model()  # type: ignore[attr-defined]
    holders: dict[int, list[torch.nn.Module]] = {}
    for module in model.modules():
        weight = module._parameters.get("weight")
        if weight is not None:
            holders.setdefault(id(weight), []).append(module)
    refreshed = 0
    for modules in holders.values():
        for module in modules[1:]:  # the first owns the weight: the reload rebuilt it
            method = getattr(module, "quant_method", None)
            if method is not None:
                method.process_weights_after_loading(module)
                refreshed += 1
    return refreshed


_PARTIAL = (
    ". Weights before it were loaded: the rollout engine is partly updated until the "
    "next successful sync"
)
