"""The `algorithm` section: the advantage estimator and what shapes it (KL in the reward,
ROLL's clipping and whitening, rollout correction, DAPO's dynamic sampling)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from rl.core.algorithms.rollout_correction import RolloutCorrectionConfig
from rl.core.config.dapo import FilterGroupsConfig
from rl.core.config.rules import (
    NON_NEGATIVE,
    POSITIVE,
    POSITIVE_INT,
    PROBABILITY,
    Checked,
    optional,
    setting,
)


@dataclass(frozen=True)
class KLControlConfig(Checked):
    type: Literal["fixed", "adaptive"] = "fixed"
    kl_coef: float = setting(0.001, NON_NEGATIVE)
    target_kl: float = setting(0.1, POSITIVE)
    horizon: int = setting(10000, POSITIVE_INT)


@dataclass(frozen=True)
class AlgorithmConfig(Checked):
    adv_estimator: str = "grpo"
    gamma: float = setting(1.0, PROBABILITY)
    lam: float = setting(1.0, PROBABILITY)
    norm_adv_by_std_in_grpo: bool = True
    # grpo's group std: sample (unbiased, verl's) or population (ddof 0, ChatLearn's),
    # and the epsilon added to it
    grpo_std: Literal["sample", "population"] = "sample"
    grpo_std_eps: float = setting(1e-6, NON_NEGATIVE)
    use_kl_in_reward: bool = False
    kl_penalty: str = "kl"
    kl_ctrl: KLControlConfig = field(default_factory=KLControlConfig)
    # ROLL's shaping around the estimator (rl.core.algorithms.shaping), all off by
    # default: clamp sequence scores (and token rewards after the KL penalty) to
    # +-reward_clip; whiten token rewards over the batch before the estimator, and
    # advantages after it; clamp advantages to +-advantage_clip, last
    reward_clip: float | None = setting(None, optional(POSITIVE))
    whiten_rewards: bool = False
    whiten_advantages: bool = False
    # how both whiten: roll, (x - mean) / sqrt(var_sample + 1e-8); rlinf, (x - mean) /
    # (std_population + 1e-5) (RLinf's normalize_advantages)
    whiten_style: Literal["roll", "rlinf"] = "roll"
    advantage_clip: float | None = setting(None, optional(POSITIVE))
    # ROLL's sample masks (rl.core.algorithms.sample_masks): leave out of the loss (and of
    # advantage whitening) the responses cut at data.max_response_length, and the groups
    # whose mean accuracy is not strictly between the two thresholds
    max_len_mask: bool = False
    difficulty_mask: bool = False
    difficulty_low_threshold: float = setting(0.0, PROBABILITY)
    difficulty_high_threshold: float = setting(1.0, PROBABILITY)
    # ROLL's per-domain pipeline: scores shaped, masked, whitened and clipped within each
    # reward domain's rows (reward.domains), not over the whole batch
    advantage_by_domain: bool = False
    # IS weights / rejection sampling / veto against the rollout engine's log-probs
    rollout_correction: RolloutCorrectionConfig = field(default_factory=RolloutCorrectionConfig)
    # DAPO's dynamic sampling (rl.core.trainer.dynamic_sampling)
    filter_groups: FilterGroupsConfig = field(default_factory=FilterGroupsConfig)
