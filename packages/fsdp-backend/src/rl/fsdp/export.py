"""The FSDP engine's weights out and in: full tensors under their Hugging Face names (LoRA
merged into them), replaced weights, and Hugging Face folders (the adapter alone in
PEFT's format under LoRA)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    set_model_state_dict,
)

from rl.core.file_modes import follow_umask
from rl.core.weight_sync.ties import with_aliases, without_aliases
from rl.fsdp.build import ShardedModel

FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)


def export_weights(built: ShardedModel, lora: Any) -> Iterator[tuple[str, torch.Tensor]]:
    """Full (unsharded) tensors under their Hugging Face names, one at a time; a tied
    parameter once, under its first name. Each is all-gathered when it is reached, so
    every rank must iterate in step."""
    with torch.no_grad():
        named = (
            (name, tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor)
            for name, tensor in without_aliases(built.model.state_dict().items(), built.tied)
        )
        if lora is not None:  # W + (alpha/r) B A under the base names
            from rl.core.models.lora import merged_weights

            named = merged_weights(named, lora.scaling)
        for name, full in named:
            yield name, full.detach()


def load_weights(
    built: ShardedModel, lora: Any, named_tensors: Iterator[tuple[str, torch.Tensor]]
) -> None:
    """Replace the weights; a tied parameter comes under its first name."""
    full = with_aliases(dict(named_tensors), built.tied)
    if lora is not None:  # into the base weights; the adapters stay as they are
        from rl.core.models.lora import base_weights

        full = base_weights(built.model, full)
        options = StateDictOptions(full_state_dict=True, cpu_offload=True, strict=False)
        set_model_state_dict(built.model, full, options=options)
        return
    set_model_state_dict(built.model, full, options=FULL)


def save_hf(built: ShardedModel, path: str, tokenizer: Any = None) -> None:
    """A Hugging Face folder loadable with `AutoModelForCausalLM.from_pretrained`; a tied
    model's shared tensor is written once (the config keeps `tie_word_embeddings`)."""
    state = get_model_state_dict(built.model, options=FULL)  # every rank gathers
    # gathered separately, tied names are two tensors: save_pretrained would write both
    state = dict(without_aliases(state.items(), built.tied))
    if built.rank == 0:
        built.model.save_pretrained(path, state_dict=state)
        if tokenizer is not None:
            tokenizer.save_pretrained(path)
        follow_umask(path)  # safetensors writes its files 0600
    if built.world_size > 1:
        dist.barrier()


def save_adapter(
    built: ShardedModel, lora: Any, merged_too: bool, path: str, tokenizer: Any = None
) -> None:
    """LoRA: the adapter alone in PEFT's format in `path` (`PeftModel.from_pretrained` on
    the base folder loads it), and with `merged_too` (`model.lora_save_merged`) the merged
    model as a Hugging Face folder in `path`/merged."""
    from rl.core.models.lora import adapter_state, merged_weights, save_adapter, save_merged

    state = get_model_state_dict(built.model, options=FULL)  # every rank gathers, once
    if built.rank == 0:
        save_adapter(path, lora, adapter_state(state.items()))
        if tokenizer is not None:
            tokenizer.save_pretrained(path)
        if merged_too:  # from the same gathered state
            named = without_aliases(state.items(), built.tied)
            merged = dict(merged_weights(named, lora.scaling))
            save_merged(built.model, merged, Path(path) / "merged", tokenizer)
        follow_umask(path)
    if built.world_size > 1:
        dist.barrier()
