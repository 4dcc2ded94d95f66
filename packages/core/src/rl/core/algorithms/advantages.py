"""Advantage estimators (`algorithm.adv_estimator`), pure functions selectable by name.

Every estimator takes per-token rewards and the response mask plus what it needs
from `AdvantageInputs`, and returns `(advantages, returns)` of the rewards' shape
and dtype, zero on padding:

- padded layout: `token_level_rewards` and `response_mask` [B, R]; per-sequence inputs
  (`prompt_uid`, `reward_baselines`) have B entries.
- packed layout: the same as flat [T] tensors plus `seq_ids` [T] (long, dense 0..S-1);
  per-sequence inputs have S entries, in sequence-id order.

Outcome estimators (grpo, rloo, reinforce_plus_plus_baseline) reduce each sequence to
one score with `segments.sequence_sums`, so they run on packed tokens directly; the
recursive ones (gae, reinforce_plus_plus, remax) scan a padded time axis, and packed
inputs are padded for them and unpadded after.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from rl.core.algorithms.groups import PromptUids, group_index, group_mean_std, group_sum_count
from rl.core.algorithms.masked import masked_whiten
from rl.core.algorithms.registry import Registry
from rl.core.algorithms.returns import discounted_returns, gae_advantages_returns
from rl.core.algorithms.segments import pad_packed, per_token, sequence_sums, unpad_packed

# algorithm.grpo_std -> the ddof of the group std
GRPO_STD_DDOF = {"sample": 1, "population": 0}


@dataclass(frozen=True)
class AdvantageInputs:
    """What estimators may need besides rewards and mask.

    values: critic values, float like the rewards (gae).
    prompt_uid: per-sequence prompt uids — list, numpy array or tensor (grpo, rloo,
        reinforce_plus_plus_baseline). `group_index` (long [S], dense) may be given instead.
    reward_baselines: float [S], reward of the greedy response to the same prompt (remax).
    seq_ids: long [T] for packed inputs, None for padded.
    gamma, lam: discount and GAE lambda. epsilon: added to the group std (grpo;
        `algorithm.grpo_std_eps`).
    norm_adv_by_std: divide by the group std (`algorithm.norm_adv_by_std_in_grpo`);
        False is Dr.GRPO.
    grpo_std: the group std of grpo (`algorithm.grpo_std`): "sample" (unbiased, verl's)
        or "population" (ddof 0, ChatLearn's).
    """

    values: torch.Tensor | None = None
    prompt_uid: PromptUids | None = None
    group_index: torch.Tensor | None = None
    reward_baselines: torch.Tensor | None = None
    seq_ids: torch.Tensor | None = None
    gamma: float = 1.0
    lam: float = 1.0
    norm_adv_by_std: bool = True
    epsilon: float = 1e-6
    grpo_std: str = "sample"

    def __post_init__(self) -> None:
        if self.grpo_std not in GRPO_STD_DDOF:
            raise ValueError(
                f"algorithm.grpo_std = {self.grpo_std!r}; allowed: {', '.join(GRPO_STD_DDOF)}"
            )
        for key, value in (("gamma", self.gamma), ("lam", self.lam)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"algorithm.{key} = {value!r}; allowed: a number in [0, 1]")
        if self.epsilon < 0:
            raise ValueError(f"advantage epsilon = {self.epsilon!r}; allowed: >= 0")


Estimator = Callable[
    [torch.Tensor, torch.Tensor, AdvantageInputs], tuple[torch.Tensor, torch.Tensor]
]
ADVANTAGE_ESTIMATORS: Registry[Estimator] = Registry(
    "advantage estimator", "algorithm.adv_estimator"
)
register_advantage_estimator = ADVANTAGE_ESTIMATORS.register
get_advantage_estimator = ADVANTAGE_ESTIMATORS.get


def _require(value: torch.Tensor | None, what: str, estimator: str) -> torch.Tensor:
    if value is None:
        raise ValueError(f"adv_estimator {estimator!r} needs {what}")
    return value


def _groups(inputs: AdvantageInputs, scores: torch.Tensor, estimator: str) -> torch.Tensor:
    """Dense prompt-group id of every sequence: long [S] on the device of `scores`."""
    if inputs.group_index is not None:
        groups = inputs.group_index
    elif inputs.prompt_uid is not None:
        groups = group_index(inputs.prompt_uid)
    else:
        raise ValueError(f"adv_estimator {estimator!r} needs prompt_uid (the prompt of each row)")
    if groups.numel() != scores.numel():
        raise ValueError(
            f"adv_estimator {estimator!r}: {groups.numel()} prompt uids for "
            f"{scores.numel()} sequences"
        )
    return groups.to(scores.device)


def _scores(rewards: torch.Tensor, mask: torch.Tensor, inputs: AdvantageInputs) -> torch.Tensor:
    """Outcome score of each sequence [S], float64: the sum of its valid token rewards.

    The outcome estimators work in float64 and return the rewards' dtype: float32 group
    statistics overflow for rewards near 2e19 (an infinite std zeroed every advantage).
    """
    return sequence_sums(rewards.to(torch.float64), mask, inputs.seq_ids)[0]


def _to_tokens(
    per_sequence: torch.Tensor, mask: torch.Tensor, inputs: AdvantageInputs, like: torch.Tensor
) -> torch.Tensor:
    """One value per sequence [S] on each of its valid tokens, 0 elsewhere; dtype of `like`."""
    tokens = per_token(per_sequence, mask, inputs.seq_ids).to(like.dtype)
    return torch.where(mask.bool(), tokens, torch.zeros_like(tokens))


def _on_padded(
    fn: Callable[..., tuple[torch.Tensor, torch.Tensor]],
    seq_ids: torch.Tensor | None,
    *tensors: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run a padded-layout `fn(*tensors)`, padding packed [T] inputs and unpadding its outputs."""
    if seq_ids is None:
        return fn(*tensors)
    first, second = fn(*(pad_packed(t, seq_ids) for t in tensors))
    return unpad_packed(first, seq_ids), unpad_packed(second, seq_ids)


@register_advantage_estimator("gae")
def gae(
    rewards: torch.Tensor, mask: torch.Tensor, inputs: AdvantageInputs
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE(gamma, lam) with a critic; advantages whitened over the batch, returns = A + V."""
    values = _require(inputs.values, "values (a critic)", "gae")

    def padded(
        r: torch.Tensor, m: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        advantages, returns = gae_advantages_returns(r, v, m, inputs.gamma, inputs.lam)
        return masked_whiten(advantages, m), returns

    return _on_padded(padded, inputs.seq_ids, rewards, mask, values)


@register_advantage_estimator("grpo")
def grpo(
    rewards: torch.Tensor, mask: torch.Tensor, inputs: AdvantageInputs
) -> tuple[torch.Tensor, torch.Tensor]:
    """(score - group mean) / (group std + epsilon) on every token; without std it is Dr.GRPO."""
    scores = _scores(rewards, mask, inputs)
    groups = _groups(inputs, scores, "grpo")
    mean, std = group_mean_std(scores, groups, ddof=GRPO_STD_DDOF[inputs.grpo_std])
    centred = scores - mean
    advantage = centred / (std + inputs.epsilon) if inputs.norm_adv_by_std else centred
    advantages = _to_tokens(advantage, mask, inputs, rewards)
    return advantages, advantages


@register_advantage_estimator("rloo")
def rloo(
    rewards: torch.Tensor, mask: torch.Tensor, inputs: AdvantageInputs
) -> tuple[torch.Tensor, torch.Tensor]:
    """Leave-one-out: score minus the mean score of the *other* responses to the prompt."""
    scores = _scores(rewards, mask, inputs)
    groups = _groups(inputs, scores, "rloo")
    sums, counts = group_sum_count(scores, groups)
    n = counts[groups]
    baseline = (sums[groups] - scores) / (n - 1).clamp(min=1)
    advantage = torch.where(n > 1, scores - baseline, scores)  # alone: no baseline exists
    advantages = _to_tokens(advantage, mask, inputs, rewards)
    return advantages, advantages


@register_advantage_estimator("reinforce_plus_plus")
def reinforce_plus_plus(
    rewards: torch.Tensor, mask: torch.Tensor, inputs: AdvantageInputs
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-level discounted returns (gamma), whitened over the batch."""

    def padded(r: torch.Tensor, m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        returns = discounted_returns(r, m, inputs.gamma)
        return masked_whiten(returns, m), returns

    return _on_padded(padded, inputs.seq_ids, rewards, mask)


@register_advantage_estimator("reinforce_plus_plus_baseline")
def reinforce_plus_plus_baseline(
    rewards: torch.Tensor, mask: torch.Tensor, inputs: AdvantageInputs
) -> tuple[torch.Tensor, torch.Tensor]:
    """Score minus its group mean on every token, whitened over the batch.

    Returns are the whitened advantages, as in verl (and as grpo and rloo return theirs):
    an outcome estimator has no return-to-go of its own, and a critic trained on it, or
    the `returns/*` metrics, see the same numbers a verl run shows.
    """
    scores = _scores(rewards, mask, inputs)
    mean, _ = group_mean_std(scores, _groups(inputs, scores, "reinforce_plus_plus_baseline"))
    centred = _to_tokens(scores - mean, mask, inputs, scores)  # float64 until whitened
    advantages = masked_whiten(centred, mask).to(rewards.dtype)
    return advantages, advantages


@register_advantage_estimator("remax")
def remax(
    rewards: torch.Tensor, mask: torch.Tensor, inputs: AdvantageInputs
) -> tuple[torch.Tensor, torch.Tensor]:
    """Undiscounted returns-to-go minus the greedy response's reward (ReMax baseline)."""
    baselines = _require(inputs.reward_baselines, "reward_baselines (greedy rewards)", "remax")

    def padded(r: torch.Tensor, m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        returns = discounted_returns(r, m, 1.0)
        shifted = returns - per_token(baselines.to(returns), returns)
        return torch.where(m.bool(), shifted, torch.zeros_like(shifted)), returns

    return _on_padded(padded, inputs.seq_ids, rewards, mask)


def compute_advantages(
    name: str, token_level_rewards: torch.Tensor, response_mask: torch.Tensor, **inputs: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run estimator `name` (`algorithm.adv_estimator`); keywords fill `AdvantageInputs`.

    Args:
        token_level_rewards: float [B, R], or [T] with `seq_ids=` for packed batches.
        response_mask: same shape, bool or 0/1.

    Returns:
        (advantages, returns), each like `token_level_rewards`, zero on padding.
    """
    estimator = get_advantage_estimator(name)
    return estimator(token_level_rewards, response_mask, AdvantageInputs(**inputs))


def normalize_advantages(
    advantages: torch.Tensor, response_mask: torch.Tensor, shift_mean: bool = True
) -> torch.Tensor:
    """Masked whitening of advantages over the whole batch: [B, R] or [T], padding 0."""
    return masked_whiten(advantages, response_mask, shift_mean=shift_mean)
