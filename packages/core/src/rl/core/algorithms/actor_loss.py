"""The full actor objective: policy loss + aggregation + entropy bonus + KL loss + TIS."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from rl.core.algorithms.aggregation import agg_loss, loss_denominator
from rl.core.algorithms.importance import truncated_is_weights
from rl.core.algorithms.kl import kl_penalty
from rl.core.algorithms.masked import masked_mean
from rl.core.algorithms.policy_losses import PolicyLossConfig, get_policy_loss


@dataclass(frozen=True)
class ActorLossConfig:
    policy_loss: str = "vanilla"
    clip: PolicyLossConfig = field(default_factory=PolicyLossConfig)
    loss_agg_mode: str = "token-mean"
    entropy_coeff: float = 0.0
    use_kl_loss: bool = False
    kl_loss_coef: float = 0.001
    kl_loss_type: str = "low_var_kl"
    tis_cap: float | None = None  # truncated importance sampling vs rollout log-probs
    use_valid_token_scale: bool = False  # RLinf: keep the loss scale when early-stop drops tokens


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
) -> tuple[torch.Tensor, dict[str, float]]:
    """Scalar loss and metrics for one (micro-)batch; all tensors [B, R], float32.

    `denominator` is the mini-batch normaliser from `aggregation.loss_denominator`.
    """
    mask = response_mask.to(logprobs.dtype)
    if denominator is None:  # normalise by the original tokens, also those early-stop drops
        denominator = loss_denominator(config.loss_agg_mode, mask)
    terms = get_policy_loss(config.policy_loss)(
        old_logprobs, logprobs, advantages, mask, config.clip
    )
    per_token = terms.loss
    if config.tis_cap is not None and rollout_logprobs is not None:
        per_token = per_token * truncated_is_weights(old_logprobs, rollout_logprobs, config.tis_cap)
    pg_loss = agg_loss(per_token, terms.mask, config.loss_agg_mode, denominator)
    if config.use_valid_token_scale:
        pg_loss = pg_loss * mask.sum() / terms.mask.sum().clamp(min=1)
    loss = pg_loss
    metrics = policy_metrics(terms, logprobs, old_logprobs, mask)
    metrics["actor/pg_loss"] = float(pg_loss.detach())
    if entropy is not None:
        entropy_term = agg_loss(entropy, mask, config.loss_agg_mode, denominator)
        metrics["actor/entropy"] = float(masked_mean(entropy.detach(), mask))
        if config.entropy_coeff:
            loss = loss - config.entropy_coeff * entropy_term
    if config.use_kl_loss:
        if ref_logprobs is None:
            raise ValueError("actor.use_kl_loss needs reference log-probs (a ref model)")
        kl = kl_penalty(logprobs, ref_logprobs, config.kl_loss_type)
        kl_term = agg_loss(kl, mask, config.loss_agg_mode, denominator)
        loss = loss + config.kl_loss_coef * kl_term
        metrics["actor/kl_loss"] = float(masked_mean(kl.detach(), mask))
    return loss, metrics


def policy_metrics(
    terms: object, logprobs: torch.Tensor, old_logprobs: torch.Tensor, mask: torch.Tensor
) -> dict[str, float]:
    """Clip fractions, approximate KL and ratio statistics over valid tokens."""
    ratio = terms.ratio  # type: ignore[attr-defined]
    valid = mask.bool()
    ratios = ratio[valid]
    return {
        "actor/pg_clipfrac_high": float(masked_mean(terms.clipped_high.float(), mask)),  # type: ignore[attr-defined]
        "actor/pg_clipfrac_low": float(masked_mean(terms.clipped_low.float(), mask)),  # type: ignore[attr-defined]
        "actor/pg_clipfrac_dual": float(masked_mean(terms.dual_clipped.float(), mask)),  # type: ignore[attr-defined]
        "actor/approx_kl": float(masked_mean((old_logprobs - logprobs).detach(), mask)),
        "actor/ratio_mean": float(ratios.mean()) if ratios.numel() else 1.0,
        "actor/ratio_max": float(ratios.max()) if ratios.numel() else 1.0,
        "actor/ratio_min": float(ratios.min()) if ratios.numel() else 1.0,
        "actor/early_stopped_frac": float(1 - terms.mask.sum() / mask.sum().clamp(min=1)),  # type: ignore[attr-defined]
    }
