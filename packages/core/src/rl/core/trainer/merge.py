"""`rl merge`: a checkpoint's role weights as a Hugging Face folder.

A checkpoint holds each role's weights as torch.distributed.checkpoint shards under
their Hugging Face names (written by every rank of whatever world size), so merging is:
verify the checkpoint, rebuild the model's architecture from the run's config, load the
shards into its full tensors (no process group needed), `save_pretrained` with the
tokenizer. The output loads with `AutoModelForCausalLM.from_pretrained` (or
`AutoModelForTokenClassification` for the critic); a model with tied word embeddings
keeps `tie_word_embeddings` and its shared tensor is written once. A LoRA run's actor
(`model.lora_rank` > 0) is written merged (`W + (alpha/r) B A`; its adapter alone is the
run's `hf` export, in PEFT's format).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from rl.core.config import load_config
from rl.core.errors import CheckpointError
from rl.core.file_modes import follow_umask
from rl.core.models.lora import LoraSettings, apply_lora, merged_weights, save_merged
from rl.core.sharded_io import load_sharded
from rl.core.trainer.checkpoint import checkpoint_dir, find_resume_checkpoint
from rl.core.trainer.manifest import verify_checkpoint
from rl.core.weight_sync.ties import tied_aliases, with_aliases, without_aliases

ROLES = ("actor", "critic", "ref")


def resolve_checkpoint(path: str | Path) -> Path:
    """A checkpoint folder (`.../global_step_N`), or a run's output folder (its newest good
    checkpoint); verified against its manifest either way."""
    folder = Path(path).expanduser()
    if (folder / "checkpoints").is_dir():
        point = find_resume_checkpoint(checkpoint_dir(folder), "auto", None)
        if point is None:
            raise CheckpointError(f"{folder} holds no checkpoint")
        return point.path
    verify_checkpoint(folder)
    return folder


def merge_checkpoint(path: str | Path, out: str | Path, role: str = "actor") -> Path:
    """Write `role`'s weights of the checkpoint at `path` to the Hugging Face folder `out`."""
    from rl.core.models import load_causal_lm, load_tokenizer, load_value_model

    if role not in ROLES:
        raise CheckpointError(f"role {role!r} is not one of {', '.join(ROLES)}")
    folder = resolve_checkpoint(path)
    shards = folder / role / "dcp"
    if not shards.is_dir():
        held = [r for r in ROLES if (folder / r / "dcp").is_dir()]
        raise CheckpointError(f"{folder} holds no {role} weights (it holds: {', '.join(held)})")
    run_config = folder.parent.parent / "config.yaml"
    if not run_config.is_file():
        raise CheckpointError(
            f"{run_config} is missing: rl merge rebuilds the model from the run's config"
        )
    config = load_config(run_config)
    tokenizer = load_tokenizer(config.model)
    load = load_value_model if role == "critic" else load_causal_lm
    model: Any = load(config.model, tokenizer)
    lora = LoraSettings.of(replace(config.model, lora_adapter_path=None))
    lora = lora if role == "actor" else None
    if lora is not None:  # the checkpoint holds base weights and adapters: inject, then merge
        apply_lora(model, lora, gradient_checkpointing=False)
    # a tied parameter (`lm_head.weight` = the embedding) is stored once, under its first
    # name (a checkpoint written before that also holds the copy, which goes unread)
    tied = tied_aliases(model)
    state = {"model": dict(without_aliases(model.state_dict().items(), tied))}
    load_sharded(state, shards, no_dist=True)  # every tensor of the model, or an error
    model.load_state_dict(with_aliases(state["model"], tied))
    merged = None
    if lora is not None:  # W + (alpha/r) B A under the Hugging Face names
        merged = dict(
            merged_weights(without_aliases(model.state_dict().items(), tied), lora.scaling)
        )
    target = Path(out).expanduser()
    if merged is not None:
        save_merged(model, merged, target)
    else:
        model.save_pretrained(target)  # the shared tensor once; the config keeps the tie
    tokenizer.save_pretrained(target)
    follow_umask(target)  # safetensors writes its files 0600
    return target
