"""Rotary frequencies recomputed from the model's config after loading.

`inv_freq` is a non-persistent buffer: no checkpoint holds it. transformers 5 builds the
model without allocating it and fills it in `_init_weights`, which it skips for a tensor
it believes initialised; in some process states (seen in a run whose megatron actor was
built first in the same process) `from_pretrained` returned it uninitialised — arbitrary
memory, so RoPE was silently wrong and, when a value was huge, every logit NaN. A loaded
model gets its rotary buffers written here, as `_init_weights` would write them."""

from __future__ import annotations

import torch


@torch.no_grad()
def reset_rotary_buffers(model: torch.nn.Module) -> int:
    """Write `inv_freq` (and `original_inv_freq`, `attention_scaling`) of each rotary
    embedding of `model` from its config; returns how many modules were written (those on
    the meta device, or of a RoPE type transformers does not name, are left alone)."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    written = 0
    for module in model.modules():
        inv_freq = getattr(module, "inv_freq", None)
        if "RotaryEmbedding" not in type(module).__name__ or not torch.is_tensor(inv_freq):
            continue
        if inv_freq.is_meta or not hasattr(module, "config"):
            continue
        functions = {
            "default": getattr(module, "compute_default_rope_parameters", None),
            "axial": getattr(module, "compute_axial_rope_parameters", None),
            **ROPE_INIT_FUNCTIONS,
        }
        compute = functions.get(getattr(module, "rope_type", "default"))
        if compute is None:
            continue
        value, scaling = compute(module.config)  # as transformers' _init_weights calls it
        value = value.to(inv_freq.device)
        inv_freq.copy_(value.to(inv_freq.dtype))
        original = getattr(module, "original_inv_freq", None)
        if torch.is_tensor(original) and original.shape == value.shape:
            original.copy_(value.to(original.dtype))
        module.attention_scaling = scaling  # type: ignore[assignment]
        written += 1
    return written
