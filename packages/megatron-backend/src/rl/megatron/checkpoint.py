"""An engine's training checkpoint: megatron-core dist-checkpointing of the model chunks
and (actor, critic) the optimizer state, plus the LR schedule, Adam's step and the
sampling generator (`state.pt`) and the HF config.json.

Both load at another layout (TP, PP, DP sizes): the model's tensors are keyed by their
whole-model names and shapes, and the distributed optimizer's state is written per
parameter in the same model space (megatron-core's `fully_reshardable`: each parameter's
fp32 copy, exp_avg and exp_avg_sq shaped like the parameter, gathered over the DP ranks
when saving, flattened and sliced to this rank's range when loading). Loaded at another
layout, weights and Adam state are the saved ones bit for bit (tested at TP 2 -> 1,
1 -> 2, PP 2 -> TP 2 and DP 2 -> TP 2; another expert-parallel size does not load). The
price is the gather: while saving, each rank holds the optimizer state of its whole
model-parallel shard in CPU memory, as each rank does while loading. A checkpoint written before this (`dp_reshardable`: the buffers as the
distributed optimizer holds them) still loads, at its own TP/PP layout only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from rl.core.checkpoint_io import load_state, save_state
from rl.core.errors import CheckpointError
from rl.megatron.logprobs import unwrap

# how the distributed optimizer's state is written (megatron-core's name for the format)
OPTIMIZER_FORMAT = "fully_reshardable"
# a checkpoint that names none: written before OPTIMIZER_FORMAT, or by a non-distributed
# optimizer (its state is per parameter whatever the name)
EARLIER_FORMAT = "dp_reshardable"


class Checkpoints:
    """Save and load the training state of `chunks` (and of `optimizer`, `scheduler` and
    `generator`); the folder also gets `hf_config`'s config.json."""

    def __init__(
        self,
        chunks: list[torch.nn.Module],
        optimizer: Any,
        scheduler: Any,
        generator: torch.Generator,
        hf_config: Any,
    ) -> None:
        self.chunks, self.optimizer, self.scheduler = chunks, optimizer, scheduler
        self.generator, self.hf_config = generator, hf_config

    def sharded_state(
        self, is_loading: bool = False, optimizer_format: str | None = None
    ) -> dict[str, Any]:
        """What megatron's dist-checkpointing saves: each chunk's sharded model state and
        (actor) the optimizer's, per parameter (`optimizer_format`, by default
        OPTIMIZER_FORMAT; loading, the one the checkpoint was written in)."""
        state: dict[str, Any] = {}
        for i, chunk in enumerate(self.chunks):
            state[f"model{i}"] = unwrap(chunk).sharded_state_dict()
        if self.optimizer is not None:
            merged: dict[str, Any] = {}
            for value in state.values():
                merged.update(value)
            # per parameter, in model space: reshardable over TP, PP and DP (megatron-core
            # 0.16's other per-parameter format, fully_sharded_model_space, is refused by
            # its own writer: "ShardedTensor.flattened_range is not supported")
            state["optimizer"] = self.optimizer.sharded_state_dict(
                merged,
                is_loading=is_loading,
                metadata={"distrib_optim_sharding_type": optimizer_format or OPTIMIZER_FORMAT},
            )
        return state

    def save(self, path: str) -> None:
        """megatron-core dist-checkpointing into `path`/dist (every rank writes its shards;
        model and optimizer state load at another TP/PP/DP layout),
        the rest (LR schedule, Adam step, sampling generator) by rank 0 into
        `path`/state.pt, and the HF config.json (so `rl convert-ckpt --to hf` and
        `use_dist_checkpointing` read the folder). A failed write is an OSError."""
        from megatron.core import dist_checkpointing
        from rl.megatron.compat import adam_step

        folder = Path(path)
        (folder / "dist").mkdir(parents=True, exist_ok=True)
        try:
            dist_checkpointing.save(self.sharded_state(), str(folder / "dist"))
        except Exception as error:  # CheckpointingException wraps the OS's error
            if isinstance(error, OSError):
                raise
            raise OSError(f"megatron checkpoint write to {folder} failed: {error}") from error
        if dist.get_rank() == 0:
            self.hf_config.save_pretrained(folder)  # `rl convert-ckpt --to hf` reads it
            state: dict[str, Any] = {"generator": self.generator.get_state()}
            if self.scheduler is not None:
                state["lr_scheduler"] = self.scheduler.state_dict()
                state["adam_step"] = adam_step(self.optimizer)
            save_state(state, folder / "state.pt")
        dist.barrier()

    def load(self, path: str) -> None:
        """What `save` wrote, resharded to this engine's layout; an unreadable checkpoint
        is a CheckpointError naming the folder."""
        from megatron.core import dist_checkpointing
        from rl.megatron.compat import fresh_adam_state, per_parameter_state_loads, set_adam_steps

        folder = Path(path)
        from torch.distributed.checkpoint.api import CheckpointException  # a BaseException

        try:
            written_as = self.optimizer_format(folder / "dist")
        except (Exception, CheckpointException) as error:
            raise unreadable(folder, error) from error
        with fresh_adam_state(self.optimizer):
            sharded = self.sharded_state(True, written_as)
        try:
            loaded = dist_checkpointing.load(sharded, str(folder / "dist"))
        except (Exception, CheckpointException) as error:  # megatron's, DCP's or the OS's
            raise unreadable(folder, error) from error
        for i, chunk in enumerate(self.chunks):
            unwrap(chunk).load_state_dict(loaded[f"model{i}"])
        state = load_state(folder / "state.pt")
        if self.optimizer is not None:
            with torch.no_grad(), per_parameter_state_loads(self.optimizer):
                self.optimizer.load_state_dict(loaded["optimizer"])
            set_adam_steps(self.optimizer, state.get("adam_step"))
        self.generator.set_state(state["generator"])
        if self.scheduler is not None:
            self.scheduler.load_state_dict(state["lr_scheduler"])

    def optimizer_format(self, folder: Path) -> str:
        """The distributed optimizer format the checkpoint in `folder` was written in
        (read from its common state; a trained engine only)."""
        if self.optimizer is None:
            return OPTIMIZER_FORMAT
        from megatron.core import dist_checkpointing

        common = dist_checkpointing.load_common_state_dict(str(folder))
        return written_format(common.get("optimizer", {})) or EARLIER_FORMAT


def written_format(common: Any) -> str | None:
    """The `param_state_sharding_type` in an optimizer's common state (a chain of
    optimizers, as for MoE's expert parameters, nests one per optimizer), or None."""
    if not isinstance(common, dict):
        return None
    found = common.get("param_state_sharding_type")
    if isinstance(found, str):
        return found
    return next(filter(None, (written_format(value) for value in common.values())), None)


def unreadable(folder: Path, error: BaseException) -> CheckpointError:
    reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return CheckpointError(
        f"{folder / 'dist'} is not a readable megatron checkpoint of this model and "
        f"layout ({type(error).__name__}: {reason[:300]}); resume from an earlier one"
    )
