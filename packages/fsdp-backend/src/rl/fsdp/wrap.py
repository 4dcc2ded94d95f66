"""Wrap a Hugging Face model with FSDP2: one `fully_shard` per decoder layer, then the root."""

from __future__ import annotations

import torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import fully_shard


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The repeated blocks of the model (`_no_split_modules` names them in transformers)."""
    names = set(getattr(model, "_no_split_modules", None) or ())
    layers = [m for m in model.modules() if type(m).__name__ in names]
    if not layers:
        raise ValueError(
            f"{type(model).__name__} declares no decoder layer class (_no_split_modules); "
            "cannot shard it layer by layer"
        )
    return layers


def shard_model(model: torch.nn.Module, mesh: DeviceMesh) -> torch.nn.Module:
    for layer in decoder_layers(model):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model
