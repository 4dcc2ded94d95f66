"""The FSDP engine's model, made ready: LoRA adapters injected (the policy's), attention
set for packed rows (varlen, or Ulysses' all-to-all), the model sharded over its mesh
(FSDP2, or HSDP below the world size), rank 0's weights broadcast under `meta_init`, and
tied parameters found (one parameter under two names: exported, checkpointed and
optimized once)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

from rl.core.config import ConfigError
from rl.core.models.batch_invariant import make_batch_invariant
from rl.core.models.vision_models import is_vision_language, vision_tower
from rl.core.role_spec import RoleSpec
from rl.core.weight_sync.ties import retie, tied_aliases
from rl.fsdp.config import FSDPConfig
from rl.fsdp.distributed import fsdp_mesh
from rl.fsdp.routing_replay import check_replay
from rl.fsdp.ulysses import SequenceParallel, check_heads, sequence_parallel_group
from rl.fsdp.ulysses import register as register_ulysses
from rl.fsdp.wrap import shard_model
from rl.kernels.varlen_attention import register as register_varlen_attention


@dataclass
class ShardedModel:
    """The model as the engine's pieces use it, and where this rank stands."""

    model: torch.nn.Module
    tied: dict[str, str]  # {alias: first name} of tied parameters
    plain: bool  # plain parameters (no FSDP2 at world size 1): exported as views
    sp: SequenceParallel | None  # the Ulysses group, if any
    rank: int
    world_size: int
    dp_size: int  # data-parallel groups (of sequence-parallel ranks, which share rows)
    dp_rank: int


def build_model(
    model: torch.nn.Module, spec: RoleSpec, fsdp: FSDPConfig, device: torch.device
) -> ShardedModel:
    """`model` (on the meta device on ranks other than 0 under `meta_init`) made ready for
    `spec`'s role on this rank."""
    section = spec.section
    check_replay(model, spec.replay_mode, spec.sequence_parallel_size)
    if spec.lora is not None:  # before anything reads the model's names or wraps it
        from rl.core.models.lora import apply_lora

        if spec.kind.values:
            raise ConfigError("model.lora_rank > 0 applies to the actor; the critic has no LoRA")
        checkpointing = bool(getattr(model, "is_gradient_checkpointing", False))
        apply_lora(model, spec.lora, checkpointing, spec.seed)
    if fsdp.offload_policy and device.type != "cuda":
        raise ConfigError(
            f"{section}.fsdp_config.offload_policy = true needs trainer.device=cuda (it "
            "moves shards between the GPU and CPU; on CPU they are there already)"
        )
    mesh = fsdp_mesh(device.type, fsdp.fsdp_size, f"{section}.fsdp_config.fsdp_size")
    sp = sequence_parallel(model, spec, device)
    vision = is_vision_language(model.config)
    if spec.freeze_vision_tower:
        if not vision:
            raise ConfigError(
                f"{section}.freeze_vision_tower = true, but {spec.model.path} is a text model "
                "(no vision tower to freeze); set it to false"
            )
        vision_tower(model).requires_grad_(False)  # before the optimizer lists parameters
    if vision and sp is not None:
        raise ConfigError(
            f"{section}.ulysses_sequence_parallel_size = {spec.sequence_parallel_size} with a "
            "vision-language model: its rows' images are not split across ranks yet (set 1)"
        )
    if spec.batch_invariant:  # rollout.batch_invariant: packed or padded
        make_batch_invariant(model)
    elif spec.use_remove_padding:  # attention within each packed sequence, no [N, N] mask
        attention = register_varlen_attention() if sp is None else register_ulysses()
        # a vision-language model packs its text; the vision tower keeps its own attention
        # (its images are sequences of their own, which it bounds itself)
        model.set_attn_implementation({"text_config": attention} if vision else attention)
    # FSDP shards (or HSDP replicates) over every rank and averages gradients over all of
    # them; data parallelism is over groups of sequence-parallel ranks, which share their
    # rows: each group takes its share of every batch
    world, rank = dist.get_world_size(), dist.get_rank()
    empty = any(p.is_meta for p in model.parameters())
    # rank 0's full weights, to broadcast once sharded (meta_init)
    full = model.to(device).state_dict() if fsdp.meta_init and not empty else None
    tied = tied_aliases(model)
    sharded = shard_model(model if empty else model.to(device), mesh, fsdp)
    plain = not any(hasattr(p, "full_tensor") for p in sharded.parameters())
    if fsdp.meta_init:
        receive_from_rank0(sharded, tied, full, rank, device)
    size = spec.sequence_parallel_size
    return ShardedModel(sharded, tied, plain, sp, rank, world, world // size, rank // size)


def receive_from_rank0(
    model: torch.nn.Module,
    tied: dict[str, str],
    full: dict[str, torch.Tensor] | None,
    rank: int,
    device: torch.device,
) -> None:
    """Every rank's shards from rank 0's full weights (the others built the model on the
    meta device); buffers, persistent or not (rotary frequencies), likewise."""
    if rank != 0:
        model.to_empty(device=device)
        retie(model, tied)  # a plain module's to_empty would untie them
    options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
    set_model_state_dict(model, full or {}, options=options)
    with torch.no_grad():
        for buffer in model.buffers():
            dist.broadcast(buffer, src=0)


def sequence_parallel(
    model: torch.nn.Module, spec: RoleSpec, device: torch.device
) -> SequenceParallel | None:
    """The Ulysses group of `{section}.ulysses_sequence_parallel_size` ranks (None at 1)."""
    size, section = spec.sequence_parallel_size, spec.section
    key = f"{section}.ulysses_sequence_parallel_size"
    if size == 1:
        return None
    world = dist.get_world_size()
    if world % size:
        raise ConfigError(f"{key} = {size} does not divide the world of {world} ranks")
    if not spec.use_remove_padding:
        raise ConfigError(f"{key} = {size} needs {section}.use_remove_padding=true")
    check_heads(model.config, size, key)
    return sequence_parallel_group(device.type, size)
