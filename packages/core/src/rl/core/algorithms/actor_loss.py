"""The full actor objective: policy loss (x rollout IS weight) - entropy bonus + KL loss.

loss = agg(pg_loss * is_weight) - entropy_coeff * agg(entropy) + kl_loss_coef * agg(KL)

where every `agg` uses the same mode, the same global denominator and the response
mask left after rollout rejection sampling (see `rollout_correction`), so the sum of
the micro-batch losses is the mini-batch loss (see `aggregation`). Compute that
denominator with `actor_loss_denominator`, which applies the same rejection.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property

import torch
import torch.distributed as dist

from rl.core.algorithms.aggregation import (
    agg_loss,
    check_loss_scale_factor,
    get_loss_agg_mode,
    loss_denominator,
)
from rl.core.algorithms.kl import get_kl_estimator, kl_loss
from rl.core.algorithms.masked import masked_mean
from rl.core.algorithms.metrics import policy_metrics
from rl.core.algorithms.policy_losses import PolicyLossConfig, get_policy_loss
from rl.core.algorithms.rollout_correction import (
    RolloutCorrection,
    RolloutCorrectionConfig,
    rollout_correction,
)

Aggregate = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class ActorLossConfig:
    """The `actor.*` keys of the objective; names are checked against the registries.

    policy_loss: `actor.policy_loss`. clip: the clip settings. loss_agg_mode and
    loss_scale_factor: see `aggregation`. entropy_coeff: weight of the entropy bonus.
    use_kl_loss, kl_loss_coef, kl_loss_type: the KL-to-reference loss term.
    rollout_correction: IS weights / rejection / veto against the rollout engine's
    log-probs (`algorithm.rollout_correction`). tis_cap: the simple case of it — token-
    level IS truncated at `tis_cap` (None: off; not together with `rollout_is`).
    use_valid_token_scale: when early stopping drops tokens, rescale each
    (micro-)batch's policy term by its valid / kept tokens, so the dropped tokens do
    not shrink the step.
    """

    policy_loss: str = "vanilla"
    clip: PolicyLossConfig = field(default_factory=PolicyLossConfig)
    loss_agg_mode: str = "token-mean"
    loss_scale_factor: float | None = None
    entropy_coeff: float = 0.0
    use_kl_loss: bool = False
    kl_loss_coef: float = 0.001
    kl_loss_type: str = "low_var_kl"
    rollout_correction: RolloutCorrectionConfig = field(default_factory=RolloutCorrectionConfig)
    tis_cap: float | None = None
    use_valid_token_scale: bool = False

    def __post_init__(self) -> None:
        get_policy_loss(self.policy_loss)
        get_loss_agg_mode(self.loss_agg_mode)
        get_kl_estimator(self.kl_loss_type)
        check_loss_scale_factor(
            self.loss_agg_mode, self.loss_scale_factor, "actor.loss_scale_factor"
        )
        if self.tis_cap is not None and self.tis_cap <= 0:
            raise ValueError(f"actor.tis_cap = {self.tis_cap!r}; allowed: > 0 or null")
        if self.tis_cap is not None and self.rollout_correction.rollout_is is not None:
            raise ValueError(
                "actor.tis_cap and algorithm.rollout_correction.rollout_is both set importance "
                "weights; keep one (tis_cap: X is rollout_is: token, rollout_is_threshold: X)"
            )

    @cached_property
    def correction(self) -> RolloutCorrectionConfig:
        """The rollout correction in force, `tis_cap` folded in as token-level IS."""
        if self.tis_cap is None:
            return self.rollout_correction
        return replace(
            self.rollout_correction, rollout_is="token", rollout_is_threshold=self.tis_cap
        )


def _correct(
    config: ActorLossConfig,
    old_logprobs: torch.Tensor,
    rollout_logprobs: torch.Tensor | None,
    response_mask: torch.Tensor,
    seq_ids: torch.Tensor | None,
) -> RolloutCorrection | None:
    """The rollout correction of this batch, None when none is configured."""
    correction = config.correction
    if not correction.enabled:
        return None
    if rollout_logprobs is None:
        raise ValueError(
            "algorithm.rollout_correction (or actor.tis_cap) needs the rollout engine's "
            "log-probs (batch key rollout_logprobs)"
        )
    return rollout_correction(old_logprobs, rollout_logprobs, response_mask, correction, seq_ids)


def actor_loss_denominator(
    config: ActorLossConfig,
    old_logprobs: torch.Tensor,
    response_mask: torch.Tensor,
    rollout_logprobs: torch.Tensor | None = None,
    seq_ids: torch.Tensor | None = None,
    group: dist.ProcessGroup | None = None,
) -> float:
    """The global normaliser of `actor_loss` for a whole mini-batch.

    Tensors are the mini-batch's (all micro-batches of this rank), float [B, R] or [T];
    tokens that rollout rejection sampling drops are not counted, as `actor_loss` drops
    them. `group`: the data-parallel group the counts are summed over.
    """
    correction = _correct(config, old_logprobs, rollout_logprobs, response_mask, seq_ids)
    mask = response_mask if correction is None else correction.mask
    return loss_denominator(
        config.loss_agg_mode, mask, seq_ids, group, loss_scale_factor=config.loss_scale_factor
    )


def actor_loss(
    logprobs: torch.Tensor,
    entropy: torch.Tensor | None,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    config: ActorLossConfig,
    denominator: float | None = None,
    ref_logprobs: torch.Tensor | None = None,
    rollout_logprobs: torch.Tensor | None = None,
    *,
    seq_ids: torch.Tensor | None = None,
    logits: torch.Tensor | None = None,
    ref_logits: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Scalar loss and metrics for one (micro-)batch.

    Args:
        logprobs: float [B, R] (or packed [T]), differentiable; the other per-token
            tensors (entropy, old/ref/rollout log-probs, advantages) have its shape.
        response_mask: like `logprobs`, bool or 0/1.
        denominator: the mini-batch normaliser from `actor_loss_denominator` (default:
            this batch's own).
        rollout_logprobs: the rollout engine's log-probs, needed by the rollout correction.
        seq_ids: long [T] for packed inputs.
        logits, ref_logits: float [B, R, V], needed only for `kl_loss_type: full`.

    Returns:
        (scalar loss in the dtype of `logprobs`, metrics: see `metrics.policy_metrics`,
        plus actor/pg_loss, actor/entropy, actor/kl_loss, actor/is_weight_mean).
    """
    correction = _correct(config, old_logprobs, rollout_logprobs, response_mask, seq_ids)
    mask = response_mask if correction is None else correction.mask
    if denominator is None:
        denominator = loss_denominator(
            config.loss_agg_mode, mask, seq_ids, loss_scale_factor=config.loss_scale_factor
        )

    def aggregate(values: torch.Tensor, kept: torch.Tensor) -> torch.Tensor:
        return agg_loss(values, kept, config.loss_agg_mode, denominator, seq_ids)

    loss, metrics = _policy_term(
        logprobs, old_logprobs, advantages, mask, config, aggregate, correction, seq_ids
    )
    if entropy is not None:
        metrics["actor/entropy"] = float(masked_mean(entropy.detach(), response_mask))
        if config.entropy_coeff:
            loss = loss - config.entropy_coeff * aggregate(entropy, mask)
    elif config.entropy_coeff:
        raise ValueError("actor.entropy_coeff != 0 needs the per-token entropy")
    if config.use_kl_loss:
        full = config.kl_loss_type == "full"
        policy_side = logits if full else logprobs
        reference_side = ref_logits if full else ref_logprobs
        if policy_side is None or reference_side is None:
            raise ValueError(_missing_kl_inputs(config.kl_loss_type))
        kl_term, kl_metrics = kl_loss(
            policy_side,
            reference_side,
            mask,
            config.kl_loss_type,
            config.loss_agg_mode,
            denominator,
            seq_ids,
        )
        loss = loss + config.kl_loss_coef * kl_term
        metrics |= kl_metrics
    return loss, metrics


def _policy_term(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    config: ActorLossConfig,
    aggregate: Aggregate,
    correction: RolloutCorrection | None,
    seq_ids: torch.Tensor | None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The aggregated policy loss (x IS weights, valid-token scale) and its metrics.

    `mask` is the response mask after rollout rejection.
    """
    terms = get_policy_loss(config.policy_loss)(
        old_logprobs, logprobs, advantages, mask, config.clip, seq_ids
    )
    metrics = policy_metrics(terms, logprobs, old_logprobs, mask)
    per_token = terms.loss
    if correction is not None and config.correction.rollout_is is not None:
        per_token = per_token * correction.weights
        metrics["actor/is_weight_mean"] = float(masked_mean(correction.weights, mask))
    pg_loss = aggregate(per_token, terms.mask)
    if config.use_valid_token_scale:
        valid = mask.to(terms.mask.dtype).sum()
        pg_loss = pg_loss * valid / terms.mask.sum().clamp(min=1)
    metrics["actor/pg_loss"] = float(pg_loss.detach())
    return pg_loss, metrics


def _missing_kl_inputs(kl_loss_type: str) -> str:
    if kl_loss_type == "full":
        return "actor.kl_loss_type 'full' needs the full logits of the policy and the reference"
    return "actor.use_kl_loss needs reference log-probs (a ref model)"
