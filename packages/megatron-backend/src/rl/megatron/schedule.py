"""Micro-batches through megatron-core's pipeline schedule (1F1B, interleaved with virtual
stages at PP >= 3), and the forward-only passes of `compute_logprobs` / `compute_values`.

A micro-batch's last pipeline stage turns the model's output into log-probs (with entropy
if asked; vocab-parallel, fused) or a critic's values, and hands them to the caller's
`last_stage(micro, output) -> (loss, results)`; forward-only passes gather the results in
the caller's row order and give them to every pipeline stage.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.distributed as dist

from rl.core.batch import select, to_device
from rl.core.engines import LogprobOutput
from rl.core.micro_batches import MicroBatching, micro_batch_rows
from rl.megatron.config import MegatronConfig
from rl.megatron.inputs import model_inputs
from rl.megatron.logprobs import response_logprobs, response_values, run_model

PADDING = "_padding"  # marks the results of a micro-batch the schedule ran only to fill it
LastStage = Callable[[Mapping[str, torch.Tensor], Any], tuple[Any, dict]]


def interleaving_group(micro_batches: int, pp: int) -> int:
    """The number of consecutive micro-batches each virtual stage runs before the next
    (megatron's `microbatch_group_size_per_vp_stage`): the smallest in [PP, M] whose
    remainder megatron accepts (0, or at least PP)."""
    for group in range(pp, micro_batches + 1):
        remainder = micro_batches % group
        if remainder == 0 or remainder >= pp:
            return group
    raise ValueError(f"{micro_batches} micro-batches < PP {pp}")


class PipelineSchedule:
    """This rank's model `chunks` (one per virtual stage) run through megatron's schedule.

    `packed`: THD inputs (`use_remove_padding`) or padded rows; `temperature` divides the
    logits before the log-probs; a `critic` outputs values instead."""

    def __init__(
        self,
        chunks: list[torch.nn.Module],
        m: MegatronConfig,
        tf_config: Any,
        critic: bool,
        packed: bool,
        temperature: float,
        device: torch.device,
    ) -> None:
        from megatron.core import parallel_state as ps

        self.ps = ps
        self.chunks, self.m, self.tf_config = chunks, m, tf_config
        self.critic, self.packed, self.temperature = critic, packed, temperature
        self.device = device

    @property
    def align(self) -> int:
        """Packed sequences' lengths are padded to a multiple of this (megatron's THD rule)."""
        tp, cp = self.m.tensor_model_parallel_size, self.m.context_parallel_size
        sp = self.tf_config.sequence_parallel
        return (tp if sp else 1) * (2 * cp if cp > 1 else 1)

    def scheduled(self, micro_batches: int) -> int:
        """How many micro-batches the schedule runs for `micro_batches` (see `run`)."""
        if len(self.chunks) > 1:
            return max(micro_batches, self.m.pipeline_model_parallel_size)
        return micro_batches

    def micro_batches(
        self, batch: Mapping[str, torch.Tensor], spec: MicroBatching
    ) -> list[tuple[torch.Tensor, dict[str, torch.Tensor]]]:
        """(rows, micro-batch on the device) pairs as `spec` cuts `batch` (a token budget
        gives every data-parallel rank the same count)."""
        group = self.ps.get_data_parallel_group()
        parts = micro_batch_rows(batch["attention_mask"], spec, group=group)
        return [(rows, to_device(select(batch, rows), self.device)) for rows in parts]

    def run(
        self,
        micros: list[Mapping[str, torch.Tensor]],
        forward_only: bool,
        last_stage: LastStage,
        with_entropy: bool = True,
    ) -> list[dict[str, Any]]:
        """Run `micros` through megatron's pipeline schedule; `last_stage(micro, output)`
        turns the last stage's output (`LogprobOutput`, with entropy if `with_entropy`, or a
        critic's values [B, R]) into (loss, results). Returns the last stage's results per
        micro-batch (empty on other stages).

        The interleaved schedule needs at least PP micro-batches: fewer are padded with
        copies of the last, whose loss is multiplied by 0 and whose results are dropped
        (megatron divides each loss by `scheduled(len(micros))`, the padded count)."""
        from megatron.core.pipeline_parallel import get_forward_backward_func

        pairs = [(micro, True) for micro in micros]
        if micros:
            pairs += [(micros[-1], False)] * (self.scheduled(len(micros)) - len(micros))
        if len(self.chunks) > 1:
            group = interleaving_group(len(pairs), self.m.pipeline_model_parallel_size)
            for chunk in self.chunks:  # the schedule reads the first chunk's config
                chunk.config.microbatch_group_size_per_vp_stage = group
        # interleaved schedules pull micro-batches per model chunk: each gets all of them
        iterators: Any = (
            iter(pairs) if len(self.chunks) == 1 else [iter(pairs) for _ in self.chunks]
        )
        results = get_forward_backward_func()(
            forward_step_func=self._forward_step(last_stage, with_entropy),
            data_iterator=iterators,
            model=self.chunks if len(self.chunks) > 1 else self.chunks[0],
            num_microbatches=len(pairs),
            seq_length=1,  # variable_seq_lengths: shapes travel with the tensors
            micro_batch_size=1,
            forward_only=forward_only,
        )
        return [result for result in results if PADDING not in result]

    def _forward_step(self, last_stage: LastStage, with_entropy: bool) -> Callable[..., Any]:
        """megatron's `forward_step_func`: the model's output and the function the last
        stage applies to it."""

        def forward_step(data_iterator: Any, model: torch.nn.Module) -> Any:
            micro, real = next(data_iterator)
            inputs = model_inputs(micro, self.packed, self.align)
            hidden = run_model(model, inputs)

            def finish(output_tensor: torch.Tensor) -> Any:
                if self.critic:
                    output: Any = response_values(model, output_tensor, inputs, micro)
                else:
                    output = LogprobOutput(
                        *response_logprobs(
                            model, output_tensor, inputs, micro, self.temperature, with_entropy
                        )
                    )
                loss, results = last_stage(micro, output)
                return (loss, results) if real else (loss * 0, {PADDING: True})

            return hidden, finish

        return forward_step

    def forward_only(
        self,
        batch: Mapping[str, torch.Tensor],
        spec: MicroBatching,
        pick: Callable[[Any], dict[str, torch.Tensor]],
        with_entropy: bool = True,
    ) -> dict[str, torch.Tensor]:
        """The last stage's outputs, `pick`ed by name, as float32 [B, R] each in the
        caller's row order, on every rank (forward-only, micro-batches as `spec` says)."""
        for chunk in self.chunks:
            chunk.eval()
        micros = [(rows, micro) for rows, micro in self.micro_batches(batch, spec) if rows.numel()]
        results = self.run(
            [micro for _, micro in micros],
            True,
            lambda micro, output: (torch.zeros((), device=self.device), pick(output)),
            with_entropy,
        )
        names = ["values"] if self.critic else ["logprobs", "entropy"]
        names = names if with_entropy else names[:1]
        out = {name: torch.zeros(batch["response_mask"].shape) for name in names}
        if self.ps.is_pipeline_last_stage(ignore_virtual=True):
            for (rows, _), result in zip(micros, results, strict=True):
                for name in names:
                    out[name][rows] = result[name].float().cpu()
        self.from_last_stage(*out.values())
        return out

    def from_last_stage(self, *tensors: torch.Tensor) -> None:
        """Every pipeline stage gets the last stage's results (in place)."""
        if self.ps.get_pipeline_model_parallel_world_size() == 1:
            return
        group = self.ps.get_pipeline_model_parallel_group()
        last = self.ps.get_pipeline_model_parallel_last_rank()
        for tensor in tensors:
            on_device = tensor.to(self.device)
            dist.broadcast(on_device, src=last, group=group)
            tensor.copy_(on_device.cpu())
