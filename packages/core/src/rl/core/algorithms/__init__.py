"""The RL math as pure functions (tensors in, tensors out), each selectable by name.

- advantages: `compute_advantages(algorithm.adv_estimator, ...)` — gae, grpo, rloo,
  reinforce_plus_plus, reinforce_plus_plus_baseline, remax; `normalize_advantages`.
- policy losses: `get_policy_loss(actor.policy_loss)` — vanilla (PPO clip, dual-clip,
  asymmetric clip), gspo, cispo; the full objective in `actor_loss`.
- aggregation: `agg_loss(..., actor.loss_agg_mode, denominator)` with `loss_denominator`.
- KL: `kl_penalty(..., kl_loss_type)` — kl/k1, abs, mse/k2, low_var_kl/k3; `full_kl`;
  fixed and adaptive controllers; `apply_kl_in_reward`.
- critic: `clipped_value_loss`; rollout mismatch: `truncated_is_weights`, `mismatch_metrics`.

See packages/core/docs/algorithms.md for the names used by verl, ROLL, ChatLearn and RLinf.
"""

from rl.core.algorithms.actor_loss import ActorLossConfig, actor_loss
from rl.core.algorithms.advantages import (
    ADVANTAGE_ESTIMATORS,
    AdvantageInputs,
    compute_advantages,
    get_advantage_estimator,
    normalize_advantages,
    register_advantage_estimator,
)
from rl.core.algorithms.aggregation import AGG_MODES, agg_loss, loss_denominator
from rl.core.algorithms.groups import group_index
from rl.core.algorithms.importance import mismatch_metrics, truncated_is_weights
from rl.core.algorithms.kl import (
    KL_ESTIMATORS,
    AdaptiveKLController,
    FixedKLController,
    apply_kl_in_reward,
    full_kl,
    kl_penalty,
    make_kl_controller,
)
from rl.core.algorithms.masked import masked_mean, masked_whiten
from rl.core.algorithms.policy_losses import POLICY_LOSSES, PolicyLossConfig, get_policy_loss
from rl.core.algorithms.value_loss import clipped_value_loss

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "AGG_MODES",
    "KL_ESTIMATORS",
    "POLICY_LOSSES",
    "ActorLossConfig",
    "AdaptiveKLController",
    "AdvantageInputs",
    "FixedKLController",
    "PolicyLossConfig",
    "actor_loss",
    "agg_loss",
    "apply_kl_in_reward",
    "clipped_value_loss",
    "compute_advantages",
    "full_kl",
    "get_advantage_estimator",
    "get_policy_loss",
    "group_index",
    "kl_penalty",
    "loss_denominator",
    "make_kl_controller",
    "masked_mean",
    "masked_whiten",
    "mismatch_metrics",
    "normalize_advantages",
    "register_advantage_estimator",
    "truncated_is_weights",
]
