"""Policy losses (`actor.policy_loss`): PPO clip (+ dual-clip, asymmetric clip), GSPO, CISPO.

Each loss is per-token math, elementwise over padded [B, R] or packed [T] tensors;
only GSPO reduces per sequence, through `segments` (so it takes `seq_ids` [T] when
packed). A loss returns `PolicyLossTerms`: the per-token loss and the flags the
metrics need. The caller aggregates with `aggregation.agg_loss` (see `actor_loss`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from rl.core.algorithms.importance import bounded_exp
from rl.core.algorithms.registry import Registry
from rl.core.algorithms.segments import per_token, sequence_sums


@dataclass(frozen=True)
class PolicyLossConfig:
    """Clip settings (`actor.*`).

    clip_ratio: symmetric epsilon; `clip_ratio_low` / `clip_ratio_high` override one side
        (DAPO clip-higher; ChatLearn `neg_clip_ratio` / `pos_clip_ratio`).
    clip_ratio_c: dual-clip bound c > 1: for A < 0 the loss is at most -c * A (None: off).
    early_stop_imp_ratio: tokens whose importance ratio exceeds it leave the loss (None: off).
    policy_loss_cap: the clipped surrogate (vanilla, gspo) of each token is at most this,
        for either sign of the advantage: ChatLearn's `final_clip_ratio` (None: off).
    """

    clip_ratio: float = 0.2
    clip_ratio_low: float | None = None
    clip_ratio_high: float | None = None
    clip_ratio_c: float | None = 3.0
    early_stop_imp_ratio: float | None = None
    policy_loss_cap: float | None = None

    def __post_init__(self) -> None:
        _check(self.clip_ratio >= 0, "actor.clip_ratio", self.clip_ratio, ">= 0")
        _check(self.low >= 0, "actor.clip_ratio_low", self.low, ">= 0")
        _check(self.high >= 0, "actor.clip_ratio_high", self.high, ">= 0")
        c = self.clip_ratio_c
        _check(c is None or c > 1, "actor.clip_ratio_c", c, "> 1 or null")
        stop = self.early_stop_imp_ratio
        _check(stop is None or stop > 0, "actor.early_stop_imp_ratio", stop, "> 0 or null")
        cap = self.policy_loss_cap
        _check(cap is None or cap > 0, "actor.policy_loss_cap", cap, "> 0 or null")

    @property
    def low(self) -> float:
        """The lower clip epsilon: the ratio is kept >= 1 - low."""
        return self.clip_ratio if self.clip_ratio_low is None else self.clip_ratio_low

    @property
    def high(self) -> float:
        """The upper clip epsilon: the ratio is kept <= 1 + high."""
        return self.clip_ratio if self.clip_ratio_high is None else self.clip_ratio_high


def _check(ok: bool, key: str, value: object, allowed: str) -> None:
    if not ok:
        raise ValueError(f"{key} = {value!r}; allowed: {allowed}")


@dataclass
class PolicyLossTerms:
    """What a policy loss returns; every tensor has the shape of the log-probs.

    loss: float per-token loss (not yet masked or aggregated).
    mask: the tokens that count — `response_mask` minus early-stopped tokens.
    ratio: detached importance ratio used by the loss (GSPO: the sequence ratio).
    clipped_high / clipped_low / dual_clipped: bool, where each bound decided the loss.
    """

    loss: torch.Tensor
    mask: torch.Tensor
    ratio: torch.Tensor
    clipped_high: torch.Tensor
    clipped_low: torch.Tensor
    dual_clipped: torch.Tensor


class PolicyLoss(Protocol):
    def __call__(
        self,
        old_logprobs: torch.Tensor,
        logprobs: torch.Tensor,
        advantages: torch.Tensor,
        response_mask: torch.Tensor,
        config: PolicyLossConfig,
        seq_ids: torch.Tensor | None = None,
    ) -> PolicyLossTerms: ...


POLICY_LOSSES: Registry[PolicyLoss] = Registry("policy loss", "actor.policy_loss")
register_policy_loss = POLICY_LOSSES.register
get_policy_loss = POLICY_LOSSES.get


def _ratio(logprobs: torch.Tensor, old_logprobs: torch.Tensor) -> torch.Tensor:
    return bounded_exp(logprobs - old_logprobs)


def _early_stop(
    response_mask: torch.Tensor, ratio: torch.Tensor, config: PolicyLossConfig
) -> torch.Tensor:
    """The response mask without tokens whose ratio exceeds `early_stop_imp_ratio`."""
    mask = response_mask.to(ratio.dtype)
    if config.early_stop_imp_ratio is None:
        return mask
    return mask * (ratio.detach() <= config.early_stop_imp_ratio).to(mask.dtype)


def cap_policy_loss(loss: torch.Tensor, cap: float | None) -> torch.Tensor:
    """min(loss, cap) per token, for either sign of the advantage (None: unchanged).

    ChatLearn's `final_clip_ratio` (loss_gallery.calculate_grpo_loss / _gspo_loss): where
    the cap binds, the token's gradient is 0.
    """
    return loss if cap is None else loss.clamp(max=cap)


def _clipped_surrogate(
    ratio: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    config: PolicyLossConfig,
    dual_clip: bool,
) -> PolicyLossTerms:
    """max(-A r, -A clip(r, 1-low, 1+high)); with `dual_clip`, for A < 0 at most -A c;
    then at most `policy_loss_cap` (ChatLearn's loss_gallery: min(pg_loss_clip, cap))."""
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1 - config.low, 1 + config.high)
    loss = torch.maximum(unclipped, clipped)
    clip_active = clipped > unclipped
    if not dual_clip or config.clip_ratio_c is None:
        use_dual = torch.zeros_like(clip_active)
    else:
        # A very negative advantage times a huge ratio would give an unbounded loss
        dual = -advantages * config.clip_ratio_c
        use_dual = (advantages < 0) & (dual < loss)
        loss = torch.where(use_dual, dual, loss)
    loss = cap_policy_loss(loss, config.policy_loss_cap)
    ratio = ratio.detach()
    return PolicyLossTerms(
        loss=loss,
        mask=_early_stop(response_mask, ratio, config),
        ratio=ratio,
        clipped_high=clip_active & (ratio > 1),
        clipped_low=clip_active & (ratio < 1),
        dual_clipped=use_dual,
    )


@register_policy_loss("vanilla", "ppo")
def ppo_clip(
    old_logprobs: torch.Tensor,
    logprobs: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    config: PolicyLossConfig,
    seq_ids: torch.Tensor | None = None,
) -> PolicyLossTerms:
    """PPO's clipped surrogate per token, r = p / p_old, with dual clip (`clip_ratio_c`);
    all inputs float [B, R] or [T]."""
    ratio = _ratio(logprobs, old_logprobs)
    return _clipped_surrogate(ratio, advantages, response_mask, config, dual_clip=True)


@register_policy_loss("gspo")
def gspo(
    old_logprobs: torch.Tensor,
    logprobs: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    config: PolicyLossConfig,
    seq_ids: torch.Tensor | None = None,
) -> PolicyLossTerms:
    """GSPO: the clipped surrogate with the sequence ratio s = exp(mean_t log(p_t / p_old,t)).

    Each token carries s_t = sg(s) * p_t / sg(p_t): the value is the sequence ratio and
    the gradient flows through the token's own log-prob, so d loss / d log p_t = -A s.
    No dual clip: the GSPO paper (and verl) bound the sequence ratio by the clip range
    alone, so `clip_ratio_c` does not apply and `dual_clipped` is all False.
    """
    sums, counts = sequence_sums((logprobs - old_logprobs).detach(), response_mask, seq_ids)
    seq_log_ratio = per_token(sums / counts.clamp(min=1), logprobs, seq_ids)
    token_log_ratio = seq_log_ratio + logprobs - logprobs.detach()
    ratio = torch.exp(token_log_ratio.clamp(max=10.0))  # GSPO's own overflow guard
    return _clipped_surrogate(ratio, advantages, response_mask, config, dual_clip=False)


@register_policy_loss("cispo")
def cispo(
    old_logprobs: torch.Tensor,
    logprobs: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    config: PolicyLossConfig,
    seq_ids: torch.Tensor | None = None,
) -> PolicyLossTerms:
    """CISPO: -sg(clip(r, 1-low, 1+high)) * A * log p.

    The importance weight is clipped and detached, so unlike PPO no token ever loses its
    gradient: d loss / d log p = -clip(r) * A everywhere.
    """
    ratio = _ratio(logprobs, old_logprobs).detach()
    weight = ratio.clamp(1 - config.low, 1 + config.high)
    return PolicyLossTerms(
        loss=-weight * advantages * logprobs,
        mask=_early_stop(response_mask, ratio, config),
        ratio=ratio,
        clipped_high=ratio > 1 + config.high,
        clipped_low=ratio < 1 - config.low,
        dual_clipped=torch.zeros_like(ratio, dtype=torch.bool),
    )
