"""Seeded random weights for a Hugging Face causal-LM (or vision-language) config, written as safetensors.

The model is built on the meta device (nothing allocated, no initialisation run) only to
learn the parameter names and shapes; each tensor is then drawn once from one seeded
generator, in the model's parameter order: about 1 s per 100 M parameters, where
`from_config` spends several times that initialising twice. Every tensor is random, the
norm weights and biases included (norms near 1), so a loader that drops one is caught
by a log-prob comparison.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

# torch module classes whose parameters are drawn around 0 (weight and bias); a vision
# tower's patch embedding is a 3-D convolution
_CENTRED = (torch.nn.Linear, torch.nn.Embedding, torch.nn.Conv3d)


def _is_norm(module: torch.nn.Module) -> bool:
    return "Norm" in type(module).__name__


def _is_moe(module: torch.nn.Module) -> bool:
    """transformers' MoE parameter holders: a router's [experts, hidden] weight and the
    experts' stacked [experts, out, in] projections (Qwen3-MoE, Mixtral)."""
    name = type(module).__name__
    return name.endswith(("TopKRouter", "Experts"))


def random_state_dict(config: Any, seed: int, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Parameter name -> tensor (`dtype`, shapes of `config`'s causal LM) from `seed`.

    Linear, embedding, router and expert tensors ~ N(0, initializer_range); norm weights ~ 1 + that. A
    tied LM head is left out (it is the embedding), as `save_pretrained` leaves it out.
    """
    from rl.core.models.vision_models import model_class

    with torch.device("meta"):
        model = model_class(config).from_config(config, dtype=dtype)
    std = float(getattr(config, "initializer_range", 0.02))
    tied = bool(getattr(config, "tie_word_embeddings", False))
    generator = torch.Generator().manual_seed(seed)
    tensors: dict[str, torch.Tensor] = {}
    for module_name, module in model.named_modules():
        for name, parameter in module.named_parameters(recurse=False):
            full_name = f"{module_name}.{name}" if module_name else name
            if tied and full_name == "lm_head.weight":
                continue
            if not (isinstance(module, _CENTRED) or _is_norm(module) or _is_moe(module)):
                raise TypeError(f"no rule draws {full_name} of {type(module).__name__}")
            values = torch.empty(parameter.shape).normal_(0.0, std, generator=generator)
            if _is_norm(module) and name == "weight":
                values += 1.0
            tensors[full_name] = values.to(dtype)
    return tensors


def write_random_weights(folder: Path, seed: int, dtype: str) -> None:
    """model.safetensors in `folder` for the config.json there (`dtype`: "float32", ...)."""
    from safetensors.torch import save_file
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(folder))
    tensors = random_state_dict(config, seed, getattr(torch, dtype))
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
