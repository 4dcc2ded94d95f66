"""Wrap a Hugging Face model with FSDP2: one `fully_shard` per decoder layer, then the root."""

from __future__ import annotations

from typing import Any

import torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

from rl.fsdp.config import FSDPConfig


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


def no_view_outputs(module: torch.nn.Module, args: Any, output: Any) -> Any:
    """Forward hook of the root: return no tensor that is a view of another.

    FSDP2 hooks the root's outputs for its pre-backward all-gather; an in-place op on a
    view output would drop that hook (wrong gradients at world size > 1). Two outputs
    of Hugging Face models are views: `hidden_states[0]` (the embeddings, as the first
    decoder layer's FSDP hook returned them) and a 1-wide head's logits (the critic's
    `score`). Only the last hidden state is ever read here, so the others are dropped
    (no copy); any remaining view is cloned (the critic's [B, T, 1] values: cheap).
    """
    hidden = getattr(output, "hidden_states", None)
    if hidden is not None:
        output.hidden_states = (hidden[-1],)
    for key, value in list(output.items()) if hasattr(output, "items") else ():
        if isinstance(value, torch.Tensor) and value._base is not None:
            output[key] = value.clone()
        elif isinstance(value, tuple):
            output[key] = tuple(
                t.clone() if isinstance(t, torch.Tensor) and t._base is not None else t
                for t in value
            )
    return output


def needs_fsdp(mesh: DeviceMesh, fsdp: FSDPConfig) -> bool:
    """Whether FSDP2 does anything for this model: shard it over more than one rank, cast
    it for compute (mixed precision) or keep it on CPU (offload policy). At one rank in
    full precision it does none of these, and its DTensor parameters only cost time (the
    optimizer step most: every op goes through DTensor's dispatch)."""
    precision = fsdp.mixed_precision
    full_precision = (precision.param_dtype, precision.reduce_dtype) == ("float32", "float32")
    return mesh.size() > 1 or fsdp.offload_policy or not full_precision


def shard_model(
    model: torch.nn.Module, mesh: DeviceMesh, fsdp: FSDPConfig | None = None
) -> torch.nn.Module:
    """`fully_shard` each decoder layer, then the root, on `mesh` (2-D: HSDP), with the
    mixed precision, resharding and CPU-offload policy of `fsdp` (`*.fsdp_config`); the
    model as it is where FSDP2 would do nothing (`needs_fsdp`). Either way its state dict
    has the same names and full shapes, so checkpoints and exports are the same."""
    fsdp = fsdp or FSDPConfig()
    if not needs_fsdp(mesh, fsdp):
        return model
    precision = fsdp.mixed_precision
    options: dict[str, Any] = {"mesh": mesh, "reshard_after_forward": fsdp.reshard_after_forward}
    if (precision.param_dtype, precision.reduce_dtype) != ("float32", "float32"):
        options["mp_policy"] = MixedPrecisionPolicy(
            param_dtype=getattr(torch, precision.param_dtype),
            reduce_dtype=getattr(torch, precision.reduce_dtype),
        )
    if fsdp.offload_policy:
        options["offload_policy"] = CPUOffloadPolicy()
    for layer in decoder_layers(model):
        fully_shard(layer, **options)
    # registered before the root's fully_shard, so it runs before FSDP2's post-forward hook
    model.register_forward_hook(no_view_outputs)
    fully_shard(model, **options)
    return model
