"""Rewards: rule-based scorers (verl's, scored exactly as verl scores them, and rl's own),
custom functions from a file, a process pool with timeouts, and a reward-model hook, all
answering `score(requests) -> RewardResult`."""

from rl.core.rewards.dapo_rule import math_dapo
from rl.core.rewards.gsm8k_rule import gsm8k
from rl.core.rewards.inputs import check_reward_inputs
from rl.core.rewards.manager import RewardManager, make_reward_manager
from rl.core.rewards.math_rule import math_reward
from rl.core.rewards.model_scorer import RewardModelScorer
from rl.core.rewards.registry import (
    default_compute_score,
    known_data_sources,
    load_custom_reward,
    scorer_for,
)
from rl.core.rewards.rule_based import (
    arithmetic,
    calculator,
    gsm8k_lenient,
    last_boxed,
    math_verify,
)
from rl.core.rewards.types import RewardRequest, RewardResult

__all__ = [
    "RewardManager",
    "RewardModelScorer",
    "RewardRequest",
    "RewardResult",
    "arithmetic",
    "calculator",
    "check_reward_inputs",
    "default_compute_score",
    "gsm8k",
    "gsm8k_lenient",
    "known_data_sources",
    "last_boxed",
    "load_custom_reward",
    "make_reward_manager",
    "math_dapo",
    "math_reward",
    "math_verify",
    "scorer_for",
]
