"""Rewards: rule-based scorers, custom functions from a file, a process pool with timeouts,
and a reward-model hook, all answering `score(requests) -> RewardResult`."""

from rl.core.rewards.inputs import check_reward_inputs
from rl.core.rewards.manager import RewardManager, make_reward_manager
from rl.core.rewards.model_scorer import RewardModelScorer
from rl.core.rewards.registry import SCORERS, default_compute_score, load_custom_reward
from rl.core.rewards.rule_based import arithmetic, gsm8k, last_boxed, math
from rl.core.rewards.types import RewardRequest, RewardResult

__all__ = [
    "SCORERS",
    "RewardManager",
    "RewardModelScorer",
    "RewardRequest",
    "RewardResult",
    "arithmetic",
    "check_reward_inputs",
    "default_compute_score",
    "gsm8k",
    "last_boxed",
    "load_custom_reward",
    "make_reward_manager",
    "math",
]
