"""On-policy distillation in the step (`distillation.enabled`): the teacher's log-probs of
the student's sampled tokens (`teacher_logprobs`), and the reverse KL they give either in
the actor's loss (verl: `loss_fn`) or in the advantages (ROLL's OPD: `shape_advantages`).
rl.core.algorithms.distillation does the math."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import torch

from rl.core import algorithms as alg
from rl.core.algorithms import distillation as opd
from rl.core.batch import Batch
from rl.core.config import Config
from rl.core.engines import LogprobOutput, LossFn

if TYPE_CHECKING:
    from rl.core.trainer.context import RunContext
    from rl.core.trainer.timers import PhaseTimer


def student_logprobs(batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """The student's log-probs of its samples before the update: the actor's old ones,
    or the rollout engine's where the update gives the old ones itself (ROLL reads
    `infer_logprobs` unless it recomputes them)."""
    old = batch.get("old_logprobs")
    return old if old is not None else batch["rollout_logprobs"]


def add_teacher_logprobs(ctx: RunContext, batch: Batch, timer: PhaseTimer) -> dict[str, float]:
    """`teacher_logprobs` of the batch's responses (nothing without a teacher); the batch's
    reverse KL from the teacher as metrics."""
    if ctx.teacher is None:
        return {}
    with timer.phase("teacher"):
        batch["teacher_logprobs"] = ctx.teacher.compute_logprobs(batch, False).logprobs
    return opd.reverse_kl_metrics(
        student_logprobs(batch), batch["teacher_logprobs"], batch["response_mask"]
    )


def shape_advantages(config: Config, batch: Batch, advantages: torch.Tensor) -> torch.Tensor:
    """ROLL's OPD (`distillation.as_advantage`): the estimator's advantages minus
    coef x the per-token estimate (without `use_task_rewards`: minus it alone), before
    whitening and clipping, as ROLL's compute_advantage; unchanged otherwise."""
    distillation = config.distillation
    if not (distillation.enabled and distillation.as_advantage):
        return advantages
    loss = distillation.distillation_loss
    kl = opd.token_reverse_kl(
        student_logprobs(batch), batch["teacher_logprobs"], loss.loss_mode, loss.loss_max_clamp
    )
    shaped = -loss.distillation_loss_coef * kl
    if loss.use_task_rewards:
        shaped = advantages + shaped
    return shaped * batch["response_mask"].to(shaped.dtype)


def loss_fn(config: Config, policy_loss_fn: LossFn) -> LossFn:
    """verl's `distillation_ppo_loss`: the actor's loss (`policy_loss_fn`) + coef x the
    distillation term with `use_task_rewards`; the distillation term alone (coef 1)
    without (the actor's loss is then computed for its metrics only). Unchanged when
    distillation is off or goes into the advantages."""
    distillation = config.distillation
    if not distillation.enabled or distillation.as_advantage:
        return policy_loss_fn
    settings, actor = distillation.distillation_loss, config.actor

    def distilled(
        output: LogprobOutput, micro: Mapping[str, torch.Tensor], mini: Mapping[str, torch.Tensor]
    ) -> tuple[torch.Tensor, dict[str, float]]:
        loss, metrics = policy_loss_fn(output, micro, mini)
        old = micro.get("old_logprobs")
        denominator = alg.loss_denominator(
            actor.loss_agg_mode, mini["response_mask"], loss_scale_factor=actor.loss_scale_factor
        )
        term, term_metrics = opd.distillation_term(
            output.logprobs,
            output.logprobs.detach() if old is None else old,
            micro["teacher_logprobs"],
            micro["response_mask"],
            settings,
            actor.loss_agg_mode,
            denominator,
        )
        # verl: the coef weighs the term only beside the task's loss
        mixed = settings.use_task_rewards
        loss = loss + settings.distillation_loss_coef * term if mixed else term
        return loss, metrics | term_metrics | {"actor/distillation_loss": float(term.detach())}

    return distilled
