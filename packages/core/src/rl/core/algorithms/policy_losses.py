"""Policy losses (`actor.policy_loss`): PPO-clip (+dual-clip, asymmetric), GSPO, CISPO.

Each returns the per-token loss [B, R] and per-token masks for metrics; the
caller aggregates with `aggregation.agg_loss`. Tokens removed by RLinf's
`early_stop_imp_ratio` come back as a reduced `mask`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from rl.core.algorithms.registry import Registry


@dataclass(frozen=True)
class PolicyLossConfig:
    clip_ratio: float = 0.2
    clip_ratio_low: float | None = None
    clip_ratio_high: float | None = None
    clip_ratio_c: float = 3.0  # dual-clip bound for negative advantages (> 1)
    early_stop_imp_ratio: float | None = None

    @property
    def low(self) -> float:
        return self.clip_ratio if self.clip_ratio_low is None else self.clip_ratio_low

    @property
    def high(self) -> float:
        return self.clip_ratio if self.clip_ratio_high is None else self.clip_ratio_high


@dataclass
class PolicyLossTerms:
    """loss: per-token loss [B, R]; mask: tokens that count; ratio and clip flags for metrics."""

    loss: torch.Tensor
    mask: torch.Tensor
    ratio: torch.Tensor
    clipped_high: torch.Tensor
    clipped_low: torch.Tensor
    dual_clipped: torch.Tensor


PolicyLoss = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, PolicyLossConfig], PolicyLossTerms
]
POLICY_LOSSES: Registry[PolicyLoss] = Registry("policy loss", "actor.policy_loss")
get_policy_loss = POLICY_LOSSES.get


def _early_stop(mask: torch.Tensor, ratio: torch.Tensor, config: PolicyLossConfig) -> torch.Tensor:
    if config.early_stop_imp_ratio is None:
        return mask
    return mask * (ratio.detach() <= config.early_stop_imp_ratio).to(mask.dtype)


def _clipped_surrogate(
    ratio: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, config: PolicyLossConfig
) -> PolicyLossTerms:
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1 - config.low, 1 + config.high)
    loss = torch.maximum(unclipped, clipped)
    dual = -advantages * config.clip_ratio_c
    use_dual = (advantages < 0) & (dual < loss)
    loss = torch.where(use_dual, dual, loss)
    clip_active = clipped > unclipped
    return PolicyLossTerms(
        loss=loss,
        mask=_early_stop(mask, ratio, config),
        ratio=ratio.detach(),
        clipped_high=clip_active & (ratio > 1),
        clipped_low=clip_active & (ratio < 1),
        dual_clipped=use_dual,
    )


@POLICY_LOSSES.register("vanilla", "ppo")
def ppo_clip(
    old_logprobs: torch.Tensor,
    logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    config: PolicyLossConfig,
) -> PolicyLossTerms:
    """max(-A r, -A clip(r, 1-low, 1+high)), and for A < 0 at most -A * clip_ratio_c."""
    ratio = torch.exp((logprobs - old_logprobs).clamp(-20, 20))
    return _clipped_surrogate(ratio, advantages, mask, config)


@POLICY_LOSSES.register("gspo")
def gspo(
    old_logprobs: torch.Tensor,
    logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    config: PolicyLossConfig,
) -> PolicyLossTerms:
    """Sequence-level ratio s = exp(mean_t log(p/p_old)), applied per token with the
    gradient of each token's own log-prob: s_t = sg(s) * p_t / sg(p_t)."""
    log_ratio = (logprobs - old_logprobs) * mask
    seq_log_ratio = log_ratio.sum(-1) / mask.sum(-1).clamp(min=1)
    token_log_ratio = seq_log_ratio.detach().unsqueeze(-1) + logprobs - logprobs.detach()
    ratio = torch.exp(token_log_ratio.clamp(max=10.0))
    return _clipped_surrogate(ratio, advantages, mask, config)


@POLICY_LOSSES.register("cispo")
def cispo(
    old_logprobs: torch.Tensor,
    logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    config: PolicyLossConfig,
) -> PolicyLossTerms:
    """-sg(clip(r, 1-low, 1+high)) * A * log p: the IS weight is clipped, never the gradient."""
    ratio = torch.exp((logprobs - old_logprobs).clamp(-20, 20))
    weight = ratio.clamp(1 - config.low, 1 + config.high).detach()
    loss = -weight * advantages * logprobs
    return PolicyLossTerms(
        loss=loss,
        mask=_early_stop(mask, ratio, config),
        ratio=ratio.detach(),
        clipped_high=ratio > 1 + config.high,
        clipped_low=ratio < 1 - config.low,
        dual_clipped=torch.zeros_like(ratio, dtype=torch.bool),
    )
