"""The FSDP engine's checkpoints: sharded, each rank writing its shards of the weights and
optimizer state to `path`/dcp (torch.distributed.checkpoint, tensors only) and rank 0
the rest (LR schedule, optimizer hyper-parameters, sampling generator, gradient scaler)
to `path`/state.pt. They load at any world size and shard size (`load` reshards; the
weights and Adam state after it are the saved ones bit for bit, tested from 2 ranks to 1,
1 to 2 and HSDP to 1), and `rl merge` makes a Hugging Face folder of one. Nothing in them
is unpickled as code (`rl.core.sharded_io`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from rl.core.checkpoint_io import load_state, save_state
from rl.core.optim import resume_schedule
from rl.core.sharded_io import load_sharded, save_sharded
from rl.core.weight_sync.ties import with_aliases, without_aliases
from rl.fsdp.build import ShardedModel
from rl.fsdp.optimizer import Training


def save(
    folder: Path, built: ShardedModel, training: Training | None, generator: torch.Generator
) -> None:
    tensors: dict[str, Any] = {"model": model_state(built)}
    state: dict[str, Any] = {"generator": generator.get_state()}
    if training is not None:
        # gradients left by a skipped step (a non-finite norm) would keep torch from
        # building the Adam state a run that never stepped still has to write: the next
        # step zeroes them first anyway
        training.optimizer.zero_grad(set_to_none=True)
        optim = get_optimizer_state_dict(built.model, training.optimizer)
        tensors["optimizer"] = optim["state"]
        state["param_groups"] = optim["param_groups"]
        state["lr_scheduler"] = training.lr_scheduler.state_dict()
        if training.grad_scaler is not None:
            state["grad_scaler"] = training.grad_scaler.state_dict()
    save_sharded(tensors, folder / "dcp")
    if built.rank == 0:
        save_state(state, folder / "state.pt")
    if built.world_size > 1:
        dist.barrier()  # no rank reads the folder before it is written


def load(
    folder: Path, built: ShardedModel, training: Training | None, generator: torch.Generator
) -> None:
    model = built.model
    tensors: dict[str, Any] = {"model": model_state(built)}
    if training is not None:
        tensors["optimizer"] = get_optimizer_state_dict(model, training.optimizer)["state"]
    load_sharded(tensors, folder / "dcp")
    set_model_state_dict(model, with_aliases(tensors["model"], built.tied))
    state = load_state(folder / "state.pt")
    generator.set_state(state["generator"])
    if training is None:
        return
    set_optimizer_state_dict(
        model,
        training.optimizer,
        {"state": tensors["optimizer"], "param_groups": state["param_groups"]},
    )
    resume_schedule(
        training.optimizer, training.lr_scheduler, state["lr_scheduler"], training.hyperparameters
    )
    if training.grad_scaler is not None and "grad_scaler" in state:
        training.grad_scaler.load_state_dict(state["grad_scaler"])


def model_state(built: ShardedModel) -> dict[str, Any]:
    """The (sharded) model state dict with each tied parameter once: checkpoints hold it
    once (one written before ties were skipped loads too: its copy goes unread)."""
    return dict(without_aliases(get_model_state_dict(built.model).items(), built.tied))
