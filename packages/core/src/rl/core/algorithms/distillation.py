"""On-policy distillation: a teacher q scores the student's (policy p's) own samples.

Per token y_t of a sampled response, the reverse KL KL(p || q) is estimated from the
two log-probs of the sampled token alone (`kl_penalty`'s sampled-token estimators; k1 =
log p - log q, k3 = q/p - log(q/p) - 1, ...). That estimate is used one of two ways:

- as a loss (verl's `distillation.distillation_loss`, `distillation_term`):
  - `use_policy_gradient: false`: the estimate itself is aggregated and backpropagated
    (a supervised loss; k1 refused: its gradient does not depend on the teacher);
  - `use_policy_gradient: true`: a PPO-clip policy-gradient term whose per-token
    advantage is minus the (detached) estimate (Tinker's recipe as verl writes it);
- as an advantage (ROLL's `use_opd` / `is_pure_opd`, `distillation_advantages`):
  advantage = task advantage - coef * estimate, or -coef * estimate alone.

Every function works on padded [B, R] tensors with a `response_mask` (or packed [T]
with `seq_ids` where it aggregates).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch

from rl.core.algorithms.aggregation import agg_loss
from rl.core.algorithms.kl import kl_penalty
from rl.core.algorithms.masked import masked_mean
from rl.core.algorithms.policy_losses import PolicyLossConfig, get_policy_loss

# verl 0.9.1's single-sample estimators (DistillationLossSettings use_estimator=True)
ESTIMATOR_LOSS_MODES = ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3")
# verl's modes that need more than the sampled token's log-probs, refused by name
REFUSED_LOSS_MODES = {
    "forward_kl_topk": "needs the teacher's top-k log-probs and token ids at every position "
    "(rl's teacher returns the sampled token's log-prob only)",
}


@dataclass(frozen=True)
class DistillationLossConfig:
    """verl's `distillation.distillation_loss` keys (their verl defaults, from the YAML).

    loss_mode: the per-token reverse-KL estimator (`ESTIMATOR_LOSS_MODES`).
    use_task_rewards: keep the task's own loss (rule rewards) beside the distillation term;
        false: the distillation term is the whole loss.
    distillation_loss_coef: the term's weight, when `use_task_rewards` (else 1, as verl).
    loss_max_clamp: the per-token estimate is clamped to [-x, x] (None: off).
    log_prob_min_clamp: verl applies it to top-k losses only; accepted for the others
        (it changes nothing there, as in verl).
    use_policy_gradient: the estimate as a (negative) advantage of a PPO-clip term.
    policy_loss_mode, clip_ratio, clip_ratio_low, clip_ratio_high: that term's loss.
    """

    loss_mode: str = "k3"
    topk: int | None = 32
    use_task_rewards: bool = True
    distillation_loss_coef: float = 1.0
    loss_max_clamp: float | None = None
    log_prob_min_clamp: float | None = None
    use_policy_gradient: bool = False
    policy_loss_mode: str = "vanilla"
    clip_ratio: float = 0.2
    clip_ratio_low: float = 0.2
    clip_ratio_high: float = 0.2

    def __post_init__(self) -> None:
        check_loss_mode(self.loss_mode, use_policy_gradient=True)  # k1's rule: `check_loss_mode`
        if self.policy_loss_mode != "vanilla":
            raise ValueError(
                f"distillation.distillation_loss.policy_loss_mode = {self.policy_loss_mode!r}; "
                "allowed: 'vanilla' (the only one verl supports for distillation)"
            )
        if self.loss_max_clamp is not None and self.loss_max_clamp <= 0:
            raise ValueError(
                f"distillation.distillation_loss.loss_max_clamp = {self.loss_max_clamp!r}; "
                "allowed: > 0 or null"
            )
        self.clip  # noqa: B018 (the clip ratios checked now)

    @cached_property
    def clip(self) -> PolicyLossConfig:
        """The policy-gradient term's clip settings (verl's dual clip c = 3 included)."""
        return PolicyLossConfig(
            clip_ratio=self.clip_ratio,
            clip_ratio_low=self.clip_ratio_low,
            clip_ratio_high=self.clip_ratio_high,
        )


def check_loss_mode(loss_mode: str, use_policy_gradient: bool) -> None:
    """Raise ValueError naming `distillation.distillation_loss.loss_mode` when rl cannot
    run it (verl's checks, and the modes it does not implement)."""
    key = "distillation.distillation_loss.loss_mode"
    if loss_mode in REFUSED_LOSS_MODES:
        raise ValueError(
            f"{key} = {loss_mode!r} is not supported: {REFUSED_LOSS_MODES[loss_mode]}; "
            f"allowed: {', '.join(ESTIMATOR_LOSS_MODES)}"
        )
    if loss_mode not in ESTIMATOR_LOSS_MODES:
        raise ValueError(f"{key} = {loss_mode!r}; allowed: {', '.join(ESTIMATOR_LOSS_MODES)}")
    if loss_mode in ("kl", "k1") and not use_policy_gradient:
        raise ValueError(
            f"{key} = {loss_mode!r} with use_policy_gradient = false: backpropagating k1 "
            "directly is wrong (its gradient does not depend on the teacher's log-probs); "
            "use k3 or use_policy_gradient = true"
        )


def token_reverse_kl(
    student_logprobs: torch.Tensor,
    teacher_logprobs: torch.Tensor,
    loss_mode: str = "k1",
    loss_max_clamp: float | None = None,
) -> torch.Tensor:
    """Per-token estimate of KL(student || teacher) on the student's sampled tokens,
    clamped to [-loss_max_clamp, loss_max_clamp] when given (k1 can be negative).

    Differentiable in `student_logprobs`; the shape of `student_logprobs`."""
    kl = kl_penalty(student_logprobs, teacher_logprobs, loss_mode)
    if loss_max_clamp is not None:
        kl = kl.clamp(-loss_max_clamp, loss_max_clamp)
    return kl


def token_rewards(
    student_logprobs: torch.Tensor, teacher_logprobs: torch.Tensor, response_mask: torch.Tensor
) -> torch.Tensor:
    """r_t = -(log p(y_t) - log q(y_t)): the per-token distillation reward (k1), 0 off
    the response."""
    return -(student_logprobs - teacher_logprobs) * response_mask.to(student_logprobs.dtype)


def distillation_advantages(
    student_logprobs: torch.Tensor,
    teacher_logprobs: torch.Tensor,
    response_mask: torch.Tensor,
    coef: float = 1.0,
    loss_mode: str = "k1",
    task_advantages: torch.Tensor | None = None,
) -> torch.Tensor:
    """ROLL's OPD advantage: task_advantages - coef * estimate (pure: -coef * estimate),
    zero off the response. The student's log-probs are the old policy's (detached)."""
    kl = kl_penalty(student_logprobs.detach(), teacher_logprobs, loss_mode)
    advantages = -coef * kl
    if task_advantages is not None:
        advantages = task_advantages + advantages
    return advantages * response_mask.to(advantages.dtype)


def distillation_term(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    teacher_logprobs: torch.Tensor,
    response_mask: torch.Tensor,
    config: DistillationLossConfig,
    loss_agg_mode: str = "token-mean",
    denominator: float | None = None,
    seq_ids: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """verl's `distillation_loss`: the distillation term of the actor loss (unweighted).

    Args:
        logprobs: the student's current log-probs, differentiable, [B, R] (or [T]).
        old_logprobs: the old policy's (for the policy-gradient ratio).
        teacher_logprobs, response_mask: same shape.
        loss_agg_mode, denominator, seq_ids: the actor's aggregation (`agg_loss`).

    Returns:
        (scalar term, metrics: distillation/loss_min, loss_max, abs_loss and, with the
        policy gradient, distillation/pg_loss, pg_clipfrac).
    """
    mask = response_mask.to(logprobs.dtype)
    losses = kl_penalty(logprobs, teacher_logprobs, config.loss_mode)
    valid = losses.detach()[mask.bool()]
    metrics = {
        "distillation/abs_loss": float(valid.abs().mean()) if valid.numel() else 0.0,
        "distillation/loss_min": float(valid.min()) if valid.numel() else 0.0,
        "distillation/loss_max": float(valid.max()) if valid.numel() else 0.0,
    }
    if config.loss_max_clamp is not None:
        losses = losses.clamp(-config.loss_max_clamp, config.loss_max_clamp)
    if not config.use_policy_gradient:
        return agg_loss(losses, mask, loss_agg_mode, denominator, seq_ids), metrics
    terms = get_policy_loss(config.policy_loss_mode)(
        old_logprobs, logprobs, -losses.detach(), mask, config.clip, seq_ids
    )
    term = agg_loss(terms.loss, terms.mask, loss_agg_mode, denominator, seq_ids)
    clipped = (terms.clipped_high | terms.clipped_low).to(mask.dtype)
    metrics["distillation/pg_loss"] = float(term.detach())
    metrics["distillation/pg_clipfrac"] = float(masked_mean(clipped, mask))
    return term, metrics


def reverse_kl_metrics(
    student_logprobs: torch.Tensor, teacher_logprobs: torch.Tensor, response_mask: torch.Tensor
) -> dict[str, float]:
    """The batch's mean per-token reverse KL (k1 and k3) and mean teacher log-prob."""
    mask = response_mask.to(torch.float64)
    student, teacher = student_logprobs.double(), teacher_logprobs.double()
    return {
        "distillation/reverse_kl": float(masked_mean(kl_penalty(student, teacher, "k1"), mask)),
        "distillation/reverse_kl_k3": float(masked_mean(kl_penalty(student, teacher, "k3"), mask)),
        "distillation/teacher_logprob_mean": float(masked_mean(teacher, mask)),
    }
