"""The FSDP engine's updates: `ppo_epochs` passes of mini-batches, one optimizer step each.

A mini-batch is cut into micro-batches whose gradients accumulate; the loss function
normalises by the whole mini-batch, so the update does not depend on the micro-batch size.
With several data-parallel ranks, every rank gets the whole batch and draws the same
mini-batches; each takes its token-balanced share of a mini-batch (`data_parallel_rows`)
while the loss still normalises by the whole one, and the gradients, which FSDP averages
over ranks, are summed instead: the update is the one a single rank makes on the same
batch. Metrics are the whole mini-batch's (`rl.core.updates`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping

import torch
import torch.distributed as dist

from rl.core.batch import select, to_device
from rl.core.engines import LossFn
from rl.core.micro_batches import micro_batch_rows, mini_batches
from rl.core.norms import square_sums
from rl.core.role_spec import RoleSpec
from rl.core.updates import TOKENS, mini_batch_updates
from rl.core.updates import step_metrics as step_metrics_of
from rl.core.workers.dispatch import data_parallel_rows
from rl.fsdp.build import ShardedModel
from rl.fsdp.optimizer import Training
from rl.fsdp.packing import shared_prompt_fraction
from rl.fsdp.passes import Passes
from rl.fsdp.routing_replay import replay_session


class Updates:
    """A trained role's train steps."""

    def __init__(
        self,
        built: ShardedModel,
        passes: Passes,
        training: Training,
        spec: RoleSpec,
        device: torch.device,
    ) -> None:
        self.built, self.passes, self.training = built, passes, training
        self.device, self.prefix = device, spec.section
        self.mini_batch_size, self.ppo_epochs, self.shuffle = (
            spec.mini_batch_size,
            spec.ppo_epochs,
            spec.shuffle,
        )
        self.batching = spec.updates
        self.grad_clip = spec.optim.grad_clip

    def train_step(
        self, batch: Mapping[str, torch.Tensor], loss_fn: LossFn, generator: torch.Generator
    ) -> dict[str, float]:
        """`ppo_epochs` passes of mini-batch updates; metrics averaged over them."""
        scheduler = self.training.lr_scheduler
        self.passes.set_training(True)
        model = self.built.model
        with replay_session(model, self.passes.router_replay):  # routes left for no one after
            metrics = mini_batch_updates(
                mini_batches(batch, self.mini_batch_size, self.ppo_epochs, self.shuffle, generator),
                lambda mini: self.optimizer_step(to_device(mini, self.device), loss_fn),
                self.prefix,
                lambda: scheduler.get_last_lr()[0],
                scheduler.step,
                self.weight_norm,
            )
        # the gradients go when the step ends (verl's actor and HF's Trainer let them go
        # too): kept, they sat beside the rollout engine while it generated and synced,
        # 747 MiB at the Qwen2.5-0.5B shape with 4 layers; `rl plan` never counted them there
        self.training.optimizer.zero_grad(set_to_none=True)
        return metrics

    def all_reduce(self, values: torch.Tensor, op: str) -> torch.Tensor:
        """`values` summed (or maxed) over every rank."""
        on_device = values.to(self.device) if self.device.type == "cuda" else values.clone()
        reduce_op = dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.MAX
        dist.all_reduce(on_device, op=reduce_op)
        return on_device.cpu()

    @torch.no_grad()
    def weight_norm(self) -> float:
        """The parameters' L2 norm, accumulated in float64 a block at a time
        (`rl.core.norms.square_sums`): a float32 sum over a real vocabulary's embedding
        (19 M values at 128 wide) is off in the fourth digit on CPU, and by a different
        amount for each sharding (1 rank vs 2 disagreed by 5e-4). A sharded parameter's
        shards are summed on each rank, then over the shards' mesh dimensions."""
        from torch.distributed.tensor import DTensor, Partial, Replicate

        plain, sharded, layout = [], [], None
        for p in self.training.parameters():  # summed on the device: one copy to the host
            if isinstance(p, DTensor):
                sharded.append(p.to_local())
                layout = layout or (p.device_mesh, p.placements)
            else:
                plain.append(p)
        total = square_sums(plain).cpu()
        if layout is not None:
            mesh, placements = layout
            over = [Partial() if pl.is_shard() else Replicate() for pl in placements]
            on_mesh = DTensor.from_local(square_sums(sharded), mesh, over)
            total = total + on_mesh.full_tensor().cpu()
        return float(total.sqrt())

    def optimizer_step(self, mini: Mapping[str, torch.Tensor], loss_fn: LossFn) -> dict[str, float]:
        optimizer, scaler, built = self.training.optimizer, self.training.grad_scaler, self.built
        optimizer.zero_grad(set_to_none=True)
        step_metrics: dict[str, list[float]] = defaultdict(list)
        prefix = self.prefix
        mine = data_parallel_rows(mini["attention_mask"].cpu(), built.dp_size)[built.dp_rank]
        local = select(mini, mine.to(self.device))
        for rows in micro_batch_rows(local["attention_mask"], self.batching):
            if not rows.numel():
                continue
            micro = select(local, rows.to(self.device))
            if self.passes.share_prompts:
                step_metrics["prompt_tokens_shared"].append(shared_prompt_fraction(micro))
            step_metrics[TOKENS].append(float(micro["response_mask"].sum()))
            loss, metrics = loss_fn(self.passes.forward(micro, True), micro, mini)
            # FSDP averages over all ranks; each rank's loss is its share (a sequence-parallel
            # group's ranks each backpropagate their slice of the same share)
            shared = loss * built.world_size
            (shared if scaler is None else scaler.scale(shared)).backward()
            # the mini-batch loss: micro-batch shares add up, over ranks too
            step_metrics[f"{prefix}/loss"].append(float(loss.detach()))
            for key, value in metrics.items():
                step_metrics[key].append(float(value))
        if scaler is not None:  # the true gradients, before clipping
            scaler.unscale_(optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.training.parameters(), self.grad_clip)
        grad_norm = float(
            grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm
        )
        if math.isfinite(grad_norm):
            if scaler is None:
                optimizer.step()
            else:
                scaler.step(optimizer)
        if scaler is not None:  # back off after an overflow, grow after a run
            scaler.update()
        # the whole mini-batch's metrics, over micro-batches and ranks (`step_metrics`);
        # loss functions may already name them ("actor/pg_loss"), others get the role
        averaged = step_metrics_of(
            step_metrics,
            prefix,
            self.all_reduce if built.world_size > 1 else None,
            duplicates=built.world_size // built.dp_size,
        )
        averaged[f"{prefix}/grad_norm"] = grad_norm
        averaged[f"{prefix}/skipped_steps"] = float(not math.isfinite(grad_norm))
        if scaler is not None:
            averaged[f"{prefix}/grad_scale"] = float(scaler.get_scale())
        return averaged
