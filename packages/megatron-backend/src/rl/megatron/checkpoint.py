"""An engine's training checkpoint: megatron-core dist-checkpointing of the model chunks
and (actor, critic) the optimizer state, plus the LR schedule, Adam's step and the
sampling generator (`state.pt`) and the HF config.json.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from rl.core.checkpoint_io import load_state, save_state
from rl.core.errors import CheckpointError
from rl.megatron.logprobs import unwrap


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

    def sharded_state(self, is_loading: bool = False) -> dict[str, Any]:
        """What megatron's dist-checkpointing saves: each chunk's sharded model state and
        (actor) the optimizer's, sharded as the distributed optimizer holds it."""
        state: dict[str, Any] = {}
        for i, chunk in enumerate(self.chunks):
            state[f"model{i}"] = unwrap(chunk).sharded_state_dict()
        if self.optimizer is not None:
            merged: dict[str, Any] = {}
            for value in state.values():
                merged.update(value)
            # per-bucket optimizer shards: parallel writes, reshardable over DP only (the
            # per-parameter formats fail without TE/Apex in megatron-core 0.16)
            state["optimizer"] = self.optimizer.sharded_state_dict(
                merged,
                is_loading=is_loading,
                metadata={"distrib_optim_sharding_type": "dp_reshardable"},
            )
        return state

    def save(self, path: str) -> None:
        """megatron-core dist-checkpointing into `path`/dist (every rank writes its shards;
        the model loads at another TP/PP layout, the optimizer state at another DP size),
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
        """What `save` wrote, at this engine's layout; an unreadable checkpoint is a
        CheckpointError naming the folder."""
        from megatron.core import dist_checkpointing
        from rl.megatron.compat import fresh_adam_state, set_adam_steps

        folder = Path(path)
        with fresh_adam_state(self.optimizer):
            sharded = self.sharded_state(is_loading=True)
        from torch.distributed.checkpoint.api import CheckpointException  # a BaseException

        try:
            loaded = dist_checkpointing.load(sharded, str(folder / "dist"))
        except (Exception, CheckpointException) as error:  # megatron's, DCP's or the OS's
            reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise CheckpointError(
                f"{folder / 'dist'} is not a readable megatron checkpoint of this model and "
                f"layout ({type(error).__name__}: {reason[:300]}); resume from an earlier one"
            ) from error
        for i, chunk in enumerate(self.chunks):
            unwrap(chunk).load_state_dict(loaded[f"model{i}"])
        state = load_state(folder / "state.pt")
        if self.optimizer is not None:
            with torch.no_grad():
                self.optimizer.load_state_dict(loaded["optimizer"])
            set_adam_steps(self.optimizer, state.get("adam_step"))
        self.generator.set_state(state["generator"])
        if self.scheduler is not None:
            self.scheduler.load_state_dict(state["lr_scheduler"])
