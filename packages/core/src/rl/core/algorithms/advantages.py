"""Advantage estimators (`algorithm.adv_estimator`), pure functions.

Every estimator takes per-token rewards [B, R] (float) and the response mask
[B, R] (1 on real tokens), plus what it needs from `AdvantageInputs`, and
returns (advantages, returns), both [B, R] and zero on padding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from rl.core.algorithms.groups import group_mean_std, group_sum_count
from rl.core.algorithms.masked import masked_whiten
from rl.core.algorithms.registry import Registry


@dataclass(frozen=True)
class AdvantageInputs:
    """What estimators may need besides rewards and mask.

    values: critic values [B, R] (gae). group_index: long [B] prompt group of
    each row (grpo, rloo, reinforce_plus_plus_baseline). reward_baselines: [B]
    greedy-response rewards (remax).
    """

    values: torch.Tensor | None = None
    group_index: torch.Tensor | None = None
    reward_baselines: torch.Tensor | None = None
    gamma: float = 1.0
    lam: float = 1.0
    norm_adv_by_std: bool = True
    epsilon: float = 1e-6


Estimator = Callable[
    [torch.Tensor, torch.Tensor, AdvantageInputs], tuple[torch.Tensor, torch.Tensor]
]
ADVANTAGE_ESTIMATORS: Registry[Estimator] = Registry(
    "advantage estimator", "algorithm.adv_estimator"
)
register_advantage_estimator = ADVANTAGE_ESTIMATORS.register
get_advantage_estimator = ADVANTAGE_ESTIMATORS.get


def _require(value: torch.Tensor | None, name: str, estimator: str) -> torch.Tensor:
    if value is None:
        raise ValueError(f"adv_estimator {estimator!r} needs {name}")
    return value


def discounted_returns(rewards: torch.Tensor, mask: torch.Tensor, gamma: float) -> torch.Tensor:
    """G_t = r_t + gamma * G_{t+1} over valid tokens only (padding is skipped, not summed)."""
    returns = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.shape[1])):
        valid = mask[:, t].bool()
        running = torch.where(valid, rewards[:, t] + gamma * running, running)
        returns[:, t] = torch.where(valid, running, torch.zeros_like(running))
    return returns


@register_advantage_estimator("gae")
def gae(
    rewards: torch.Tensor, mask: torch.Tensor, inputs: AdvantageInputs
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation; padded positions are skipped in the recursion, so
    neither their values nor their rewards leak into valid positions. Advantages whitened."""
    values = _require(inputs.values, "values (a critic)", "gae")
    advantages = torch.zeros_like(rewards)
    last_gae = torch.zeros_like(rewards[:, 0])
    next_value = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.shape[1])):
        valid = mask[:, t].bool()
        delta = rewards[:, t] + inputs.gamma * next_value - values[:, t]
        step_gae = delta + inputs.gamma * inputs.lam * last_gae
        last_gae = torch.where(valid, step_gae, last_gae)
        next_value = torch.where(valid, values[:, t], next_value)
        advantages[:, t] = torch.where(valid, step_gae, torch.zeros_like(step_gae))
    returns = torch.where(mask.bool(), advantages + values, torch.zeros_like(values))
    return masked_whiten(advantages, mask), returns


def _outcome(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (rewards * mask).sum(-1)


@register_advantage_estimator("grpo")
def grpo(
    rewards: torch.Tensor, mask: torch.Tensor, inputs: AdvantageInputs
) -> tuple[torch.Tensor, torch.Tensor]:
    """(score - group mean) / (group std + eps); without std normalisation it is Dr.GRPO."""
    groups = _require(inputs.group_index, "group_index (prompt uids)", "grpo")
    scores = _outcome(rewards, mask)
    mean, std = group_mean_std(scores, groups)
    centred = scores - mean
    advantage = centred / (std + inputs.epsilon) if inputs.norm_adv_by_std else centred
    advantages = advantage.unsqueeze(-1) * mask
    return advantages, advantages


@register_advantage_estimator("rloo")
def rloo(
    rewards: torch.Tensor, mask: torch.Tensor, inputs: AdvantageInputs
) -> tuple[torch.Tensor, torch.Tensor]:
    """Leave-one-out baseline: score minus the mean of the *other* responses of the prompt."""
    groups = _require(inputs.group_index, "group_index (prompt uids)", "rloo")
    scores = _outcome(rewards, mask)
    sums, counts = group_sum_count(scores, groups)
    n = counts[groups]
    baseline = (sums[groups] - scores) / (n - 1).clamp(min=1)
    advantage = torch.where(n > 1, scores - baseline, scores)
    advantages = advantage.unsqueeze(-1) * mask
    return advantages, advantages


@register_advantage_estimator("reinforce_plus_plus")
def reinforce_plus_plus(
    rewards: torch.Tensor, mask: torch.Tensor, inputs: AdvantageInputs
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-level discounted returns, whitened over the batch."""
    returns = discounted_returns(rewards, mask, inputs.gamma)
    return masked_whiten(returns, mask), returns


@register_advantage_estimator("reinforce_plus_plus_baseline")
def reinforce_plus_plus_baseline(
    rewards: torch.Tensor, mask: torch.Tensor, inputs: AdvantageInputs
) -> tuple[torch.Tensor, torch.Tensor]:
    """Score minus its group mean, broadcast over the tokens, whitened over the batch."""
    groups = _require(
        inputs.group_index, "group_index (prompt uids)", "reinforce_plus_plus_baseline"
    )
    scores = _outcome(rewards, mask)
    mean, _ = group_mean_std(scores, groups)
    centred = (scores - mean).unsqueeze(-1) * mask
    return masked_whiten(centred, mask), centred


@register_advantage_estimator("remax")
def remax(
    rewards: torch.Tensor, mask: torch.Tensor, inputs: AdvantageInputs
) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns-to-go minus the greedy response's reward (the baseline), per token."""
    baselines = _require(inputs.reward_baselines, "reward_baselines (greedy rewards)", "remax")
    returns = discounted_returns(rewards, mask, 1.0)
    advantages = (returns - baselines.unsqueeze(-1)) * mask
    return advantages, returns


def compute_advantages(
    name: str, token_level_rewards: torch.Tensor, response_mask: torch.Tensor, **inputs: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run estimator `name`; keyword arguments fill `AdvantageInputs`."""
    estimator = get_advantage_estimator(name)
    return estimator(
        token_level_rewards, response_mask.to(token_level_rewards.dtype), AdvantageInputs(**inputs)
    )


def normalize_advantages(advantages: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Masked whitening of advantages over the whole batch."""
    return masked_whiten(advantages, response_mask)
