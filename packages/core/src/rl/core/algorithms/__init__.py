"""The RL math as pure functions (tensors in, tensors out), each selectable by name.

- advantages (`algorithm.adv_estimator`): `compute_advantages` — gae, grpo, rloo,
  reinforce (ROLL's), reinforce_plus_plus, reinforce_plus_plus_baseline, remax;
  `normalize_advantages`; ROLL's shaping around them (`algorithm.reward_clip`,
  `advantage_clip`, `whiten_rewards`, `whiten_advantages`): `clip_values`, `whiten`.
- policy losses (`actor.policy_loss`): vanilla/ppo (clip, asymmetric clip, dual-clip),
  gspo, cispo; the whole objective with entropy, KL loss and rollout correction in
  `actor_loss` (normaliser: `actor_loss_denominator`).
- aggregation (`actor.loss_agg_mode`): token-mean, token-sum, seq-mean-token-sum,
  seq-mean-token-mean, seq-mean-token-sum-norm; `agg_loss` with a global `loss_denominator`.
- KL (`actor.kl_loss_type`, `algorithm.kl_penalty`): kl/k1, abs, mse/k2, low_var_kl/k3,
  each also with a `+` suffix (k2 gradient, straight-through), full; `kl_loss`; KL in the
  reward with fixed/adaptive controllers.
- critic: `value_loss`; rollout mismatch: `rollout_correction` (IS weights, rejection
  sampling, veto: `algorithm.rollout_correction`), `truncated_is_weights`,
  `mismatch_metrics`.
- DAPO: `overlong_penalty` (reward shaping of long responses), `informative_groups`
  (dynamic sampling's group filter).

Every per-token function works on padded [B, R] tensors with a `response_mask`, and on
packed [T] tensors with `seq_ids` where it reduces per sequence. Each registry has a
`register_*` decorator and a `get_*` lookup whose error lists the valid names.
See packages/core/docs/algorithms.md for the names used by verl, ROLL, ChatLearn, RLinf.
"""

from rl.core.algorithms.actor_loss import ActorLossConfig, actor_loss, actor_loss_denominator
from rl.core.algorithms.advantages import (
    ADVANTAGE_ESTIMATORS,
    AdvantageInputs,
    compute_advantages,
    get_advantage_estimator,
    normalize_advantages,
    register_advantage_estimator,
)
from rl.core.algorithms.aggregation import (
    LOSS_AGG_MODES,
    LossAggMode,
    agg_loss,
    check_loss_scale_factor,
    get_loss_agg_mode,
    loss_denominator,
    register_loss_agg_mode,
)
from rl.core.algorithms.group_filter import informative_groups
from rl.core.algorithms.groups import group_index, group_mean_std
from rl.core.algorithms.importance import mismatch_metrics, truncated_is_weights
from rl.core.algorithms.kl import (
    KL_ESTIMATORS,
    full_kl,
    get_kl_estimator,
    kl_loss,
    kl_penalty,
    register_kl_estimator,
)
from rl.core.algorithms.kl_control import (
    KL_CONTROLLERS,
    AdaptiveKLController,
    FixedKLController,
    KLController,
    adaptive_kl_coef,
    apply_kl_in_reward,
    make_kl_controller,
)
from rl.core.algorithms.masked import masked_mean, masked_stats, masked_sum, masked_whiten
from rl.core.algorithms.metrics import advantage_metrics, policy_metrics
from rl.core.algorithms.overlong import overlong_penalty
from rl.core.algorithms.policy_losses import (
    POLICY_LOSSES,
    PolicyLossConfig,
    PolicyLossTerms,
    get_policy_loss,
    register_policy_loss,
)
from rl.core.algorithms.registry import Registry
from rl.core.algorithms.reinforce import reinforce
from rl.core.algorithms.returns import discounted_returns, gae_advantages_returns
from rl.core.algorithms.rollout_correction import (
    RolloutCorrection,
    RolloutCorrectionConfig,
    rollout_correction,
    rollout_correction_metrics,
)
from rl.core.algorithms.sample_masks import difficulty_mask, max_len_mask
from rl.core.algorithms.score_stats import GROUP_ESTIMATORS, nonfinite_count, score_statistics
from rl.core.algorithms.segments import pad_packed, per_token, sequence_sums, unpad_packed
from rl.core.algorithms.shaping import clip_values, whiten
from rl.core.algorithms.value_loss import clipped_value_loss, value_loss

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "GROUP_ESTIMATORS",
    "KL_CONTROLLERS",
    "KL_ESTIMATORS",
    "LOSS_AGG_MODES",
    "POLICY_LOSSES",
    "ActorLossConfig",
    "AdaptiveKLController",
    "AdvantageInputs",
    "FixedKLController",
    "KLController",
    "LossAggMode",
    "PolicyLossConfig",
    "PolicyLossTerms",
    "Registry",
    "RolloutCorrection",
    "RolloutCorrectionConfig",
    "actor_loss",
    "actor_loss_denominator",
    "adaptive_kl_coef",
    "advantage_metrics",
    "agg_loss",
    "apply_kl_in_reward",
    "check_loss_scale_factor",
    "clip_values",
    "clipped_value_loss",
    "compute_advantages",
    "difficulty_mask",
    "discounted_returns",
    "full_kl",
    "gae_advantages_returns",
    "get_advantage_estimator",
    "get_kl_estimator",
    "get_loss_agg_mode",
    "get_policy_loss",
    "group_index",
    "group_mean_std",
    "informative_groups",
    "kl_loss",
    "kl_penalty",
    "loss_denominator",
    "make_kl_controller",
    "masked_mean",
    "masked_stats",
    "masked_sum",
    "masked_whiten",
    "max_len_mask",
    "mismatch_metrics",
    "nonfinite_count",
    "normalize_advantages",
    "overlong_penalty",
    "pad_packed",
    "per_token",
    "policy_metrics",
    "register_advantage_estimator",
    "register_kl_estimator",
    "register_loss_agg_mode",
    "register_policy_loss",
    "reinforce",
    "rollout_correction",
    "rollout_correction_metrics",
    "score_statistics",
    "sequence_sums",
    "truncated_is_weights",
    "unpad_packed",
    "value_loss",
    "whiten",
]
