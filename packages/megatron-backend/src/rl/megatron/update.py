"""`train_step` on megatron-core: one optimizer step per mini-batch.

The same semantics as the FSDP engine: a mini-batch is one optimizer step, cut into
micro-batches (rows or a token budget) whose gradients accumulate; `loss_fn` normalises
by the whole mini-batch; with several data-parallel groups each takes its token-balanced
share of every mini-batch and the update equals one rank's on the whole of it. The metrics
are the role's (`actor/`, `critic/`): the loss, `loss_fn`'s, `grad_norm`, `weight_norm`,
`skipped_steps` and `lr`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import torch
import torch.distributed as dist

from rl.core.batch import select, to_device
from rl.core.engines import LogprobOutput, LossFn
from rl.core.micro_batches import MicroBatching
from rl.core.norms import square_sum
from rl.core.updates import TOKENS, mini_batch_updates, step_metrics
from rl.core.workers.dispatch import data_parallel_rows
from rl.megatron.schedule import PipelineSchedule


class TrainSteps:
    """Optimizer steps over the `schedule`'s chunks with megatron's `optimizer` and LR
    `scheduler`; metrics under `section`/."""

    def __init__(self, schedule: PipelineSchedule, optimizer: Any, scheduler: Any, section: str):
        self.schedule, self.optimizer, self.scheduler = schedule, optimizer, scheduler
        self.section = section
        self.ps, self.device = schedule.ps, schedule.device
        self.dp_size = self.ps.get_data_parallel_world_size()
        self.dp_rank = self.ps.get_data_parallel_rank()

    def train_step(
        self, minis: Iterable[Mapping[str, torch.Tensor]], loss_fn: LossFn, spec: MicroBatching
    ) -> dict[str, float]:
        """One optimizer step per mini-batch of `minis` (micro-batches as `spec` says);
        the LR schedule advances once if any step was taken. Metrics averaged over the
        steps."""
        for chunk in self.schedule.chunks:
            chunk.train()
        return mini_batch_updates(
            minis,
            lambda mini: self.optimizer_step(mini, loss_fn, spec),
            self.section,
            lambda: self.optimizer.param_groups[0]["lr"],
            lambda: self.scheduler.step(increment=1),
            lambda: weight_norm(self.schedule.chunks, self.device),
        )

    def optimizer_step(
        self, mini: Mapping[str, torch.Tensor], loss_fn: LossFn, spec: MicroBatching
    ) -> dict[str, float]:
        """This rank's share of `mini` through the schedule, then one optimizer step."""
        for chunk in self.schedule.chunks:
            chunk.zero_grad_buffer()
        self.optimizer.zero_grad()
        mine = data_parallel_rows(mini["attention_mask"].cpu(), self.dp_size)[self.dp_rank]
        local = select(mini, mine)
        micros = [m for rows, m in self.schedule.micro_batches(local, spec) if rows.numel()]
        whole = to_device(mini, self.device)
        # megatron divides each micro-batch loss by their count and DDP averages over the
        # data-parallel ranks; loss_fn's shares already add up to the mini-batch loss
        scale = self.schedule.scheduled(len(micros)) * self.dp_size

        def last_stage(micro: Mapping[str, torch.Tensor], output: LogprobOutput) -> Any:
            loss, step_metrics = loss_fn(output, micro, whole)
            reported = {k: float(v) for k, v in step_metrics.items()}
            reported[f"{self.section}/loss"] = float(loss.detach())  # a share: summed
            reported[TOKENS] = float(micro["response_mask"].sum())
            return loss * scale, reported

        results = self.schedule.run(micros, False, last_stage)
        success, grad_norm, _ = self.optimizer.step()
        grad_norm = float("nan") if grad_norm is None else float(grad_norm)
        skipped = not success or not math.isfinite(grad_norm)
        averaged = self.metrics(results)
        averaged[f"{self.section}/grad_norm"] = grad_norm
        averaged[f"{self.section}/skipped_steps"] = float(skipped)
        if getattr(getattr(self.optimizer, "config", None), "fp16", False):  # loss scaling
            averaged[f"{self.section}/grad_scale"] = float(self.optimizer.get_loss_scale())
        return averaged

    def metrics(self, results: list[dict[str, float]]) -> dict[str, float]:
        """The last stage's micro-batch metrics, on every rank, as the whole mini-batch's
        (`rl.core.updates.step_metrics`: over micro-batches and data-parallel ranks; the
        loss shares summed into the mini-batch loss)."""
        gathered: list[Any] = [results]
        if self.ps.get_pipeline_model_parallel_world_size() > 1:
            dist.broadcast_object_list(
                gathered,
                src=self.ps.get_pipeline_model_parallel_last_rank(),
                group=self.ps.get_pipeline_model_parallel_group(),
            )
        values: dict[str, list[float]] = defaultdict(list)
        for result in gathered[0]:
            for key, value in result.items():
                values[key].append(value)
        return step_metrics(values, self.section, self._all_reduce if self.dp_size > 1 else None)

    def _all_reduce(self, values: torch.Tensor, op: str) -> torch.Tensor:
        """`values` summed (or maxed) over the data-parallel ranks."""
        on_device = values.to(self.device)
        reduce_op = dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.MAX
        dist.all_reduce(on_device, op=reduce_op, group=self.ps.get_data_parallel_group())
        return on_device.cpu()


@torch.no_grad()
def weight_norm(chunks: list[torch.nn.Module], device: torch.device) -> float:
    """The L2 norm of the whole model: each TP shard, pipeline stage and expert once."""
    from megatron.core import parallel_state as ps
    from megatron.core.tensor_parallel import param_is_not_tensor_parallel_duplicate
    from megatron.core.transformer.module import param_is_not_shared

    dense = torch.zeros((), dtype=torch.float64, device=device)
    experts = torch.zeros((), dtype=torch.float64, device=device)
    for chunk in chunks:
        for param in chunk.parameters():
            if param_is_not_shared(param) and param_is_not_tensor_parallel_duplicate(param):
                total = experts if not getattr(param, "allreduce", True) else dense
                total += square_sum(param)  # float64, no float64 copy of the whole
    dist.all_reduce(dense, group=ps.get_model_parallel_group())
    dist.all_reduce(experts, group=ps.get_expert_tensor_model_pipeline_parallel_group())
    return float((dense + experts).sqrt())
