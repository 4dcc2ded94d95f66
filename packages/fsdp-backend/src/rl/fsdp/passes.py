"""The FSDP engine's forward passes: log-probs and entropy of the response tokens (the
fused kernel or the plain path, one of them for every pass), a critic's values, under
the precision of `fsdp_config.amp_autocast` and the MoE routing replay of the role."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import nullcontext
from typing import Any

import torch

from rl.core.batch import select, to_device
from rl.core.config.schema import fused_log_probs
from rl.core.engines import LogprobOutput
from rl.core.micro_batches import micro_batch_rows
from rl.core.models.vision_models import is_vision_language
from rl.core.role_spec import RoleSpec
from rl.fsdp.build import ShardedModel
from rl.fsdp.forward import fused_logprobs_and_entropy, response_logprobs, response_values
from rl.fsdp.packing import prefix_grouping
from rl.fsdp.precision import autocast
from rl.fsdp.routing_replay import Phase, RecordedRoutes, replay_session, routing_pass


class Passes:
    """Forward passes of one model as its role runs them."""

    def __init__(
        self,
        built: ShardedModel,
        spec: RoleSpec,
        device: torch.device,
        autocast_dtype: torch.dtype | None,
        vocab_size: int,
        views: bool,
    ) -> None:
        self.model, self.device, self.vocab_size = built.model, device, vocab_size
        self.values = spec.kind.values
        self.temperature = spec.temperature
        self.use_fused_kernels = spec.use_fused_kernels
        self.router_replay = spec.replay_mode
        self.batching = spec.forwards
        self.packed, self.sp = spec.use_remove_padding, built.sp
        self.share_prompts = prefix_grouping(
            spec.use_prefix_grouper,
            self.packed,
            self.sp,
            spec.section,
            images=is_vision_language(self.model.config),
        )
        self.autocast_dtype = autocast_dtype
        # inference mode (no autograd bookkeeping per op) on a plain model; FSDP2's
        # parameter hooks need autograd's version counters, so the callers' no_grad there
        self.inference = views

    def fused(self) -> bool:
        """One log-prob path for every pass (old, reference, training), whatever the grad
        mode: a frozen copy of the actor then gives exactly the training log-probs (zero
        KL), which two paths, equal only to rounding, do not. None = auto: fused on GPU,
        and on CPU for a real vocabulary, where the [tokens, vocab] logits it never holds
        are the memory that counts."""
        return fused_log_probs(self.use_fused_kernels, self.device.type, self.vocab_size)

    def autocast(self) -> Any:
        return autocast(self.autocast_dtype, self.device)

    def forward(
        self, micro: Mapping[str, torch.Tensor], with_entropy: bool, phase: Phase = "update"
    ) -> Any:
        """One micro-batch: a critic's values, else a `LogprobOutput`."""
        packing = {"packed": self.packed, "sp": self.sp, "share_prompts": self.share_prompts}
        if self.values:
            with self.autocast():
                return response_values(self.model, micro, **packing)
        compute = fused_logprobs_and_entropy if self.fused() else response_logprobs
        routing = routing_pass(self.router_replay, micro, phase)
        with self.autocast():
            output = LogprobOutput(
                *compute(
                    self.model, micro, self.temperature, with_entropy, **packing, routing=routing
                )
            )
        output.routed_experts = None if routing is None else routing.recorded
        return output

    def set_training(self, training: bool) -> None:
        """`model.train(training)`, skipped when already so (it walks every module)."""
        if self.model.training != training:
            self.model.train(training)

    def forward_rows(self, batch: Mapping[str, torch.Tensor], with_entropy: bool) -> list[Any]:
        """Forward-only over the role's forward micro-batches; each result with its rows."""
        self.set_training(False)
        results = []
        with (
            torch.inference_mode() if self.inference else nullcontext(),
            replay_session(self.model, self.router_replay),
        ):
            for rows in micro_batch_rows(batch["attention_mask"], self.batching):
                if rows.numel():
                    micro = to_device(select(batch, rows), self.device)
                    results.append((rows, self.forward(micro, with_entropy, "old")))
        return results

    @torch.no_grad()
    def logprobs(
        self, batch: Mapping[str, torch.Tensor], calculate_entropy: bool = True
    ) -> LogprobOutput:
        """Log-probs and (if `calculate_entropy`, else None) entropy of the response
        tokens: float32 [B, R] each, in the caller's row order whatever the micro-batching
        did; with routing replay R2, the routes the pass recorded."""
        shape = batch["response_mask"].shape
        logprobs = torch.zeros(shape)
        entropy = torch.zeros(shape) if calculate_entropy else None
        routes = RecordedRoutes(*batch["input_ids"].shape)
        for rows, output in self.forward_rows(batch, calculate_entropy):
            logprobs[rows] = output.logprobs.cpu()
            if entropy is not None:
                entropy[rows] = output.entropy.cpu()
            routes.add(rows, output.routed_experts)
        return LogprobOutput(logprobs, entropy, routes.routes)

    @torch.no_grad()
    def critic_values(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Critic values of the response positions: float32 [B, R], in the caller's order."""
        values = torch.zeros(batch["response_mask"].shape)
        for rows, output in self.forward_rows(batch, False):
            values[rows] = output.cpu()
        return values
