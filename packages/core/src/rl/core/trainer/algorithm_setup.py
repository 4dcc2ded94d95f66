"""Config -> the algorithm functions the step uses: which estimator, loss and KL control
the config names, with their settings (rl.core.algorithms does the math)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from rl.core import algorithms as alg
from rl.core.batch import Batch
from rl.core.config import Config, ConfigError
from rl.core.engines import LogprobOutput, LossFn
from rl.core.trainer import distillation


def actor_loss_config(config: Config) -> alg.ActorLossConfig:
    actor = config.actor
    return alg.ActorLossConfig(
        policy_loss=actor.policy_loss,
        clip=alg.PolicyLossConfig(
            clip_ratio=actor.clip_ratio,
            clip_ratio_low=actor.clip_ratio_low,
            clip_ratio_high=actor.clip_ratio_high,
            clip_ratio_c=actor.clip_ratio_c,
            early_stop_imp_ratio=actor.early_stop_imp_ratio,
            policy_loss_cap=actor.policy_loss_cap,
        ),
        loss_agg_mode=actor.loss_agg_mode,
        loss_scale_factor=actor.loss_scale_factor,
        entropy_coeff=actor.entropy_coeff,
        use_kl_loss=actor.use_kl_loss,
        kl_loss_coef=actor.kl_loss_coef,
        kl_loss_type=actor.kl_loss_type,
        rollout_correction=config.algorithm.rollout_correction,
        tis_cap=actor.tis_cap,
        use_valid_token_scale=actor.use_valid_token_scale,
    )


def validate_algorithm_names(config: Config) -> None:
    """Fail before any model loads when a name is unknown (the error lists valid ones).

    Names are looked up in the registries only now, not in the schema, so a plugin may
    register its own before training starts. Raises `ConfigError` naming the key.
    """
    actor, critic, algorithm = config.actor, config.critic, config.algorithm
    names: list[tuple[alg.Registry[Any], str, str]] = [
        (alg.ADVANTAGE_ESTIMATORS, "algorithm.adv_estimator", algorithm.adv_estimator),
        (alg.POLICY_LOSSES, "actor.policy_loss", actor.policy_loss),
        (alg.LOSS_AGG_MODES, "actor.loss_agg_mode", actor.loss_agg_mode),
        (alg.LOSS_AGG_MODES, "critic.loss_agg_mode", critic.loss_agg_mode),
        (alg.KL_ESTIMATORS, "actor.kl_loss_type", actor.kl_loss_type),
        (alg.KL_ESTIMATORS, "algorithm.kl_penalty", algorithm.kl_penalty),
        (alg.KL_CONTROLLERS, "algorithm.kl_ctrl.type", algorithm.kl_ctrl.type),
    ]
    try:
        for registry, key, name in names:
            registry.get(name, key=key)
        for section, agg in (("actor", actor), ("critic", critic)):
            key = f"{section}.loss_scale_factor"
            alg.check_loss_scale_factor(agg.loss_agg_mode, agg.loss_scale_factor, key)
        actor_loss_config(config)  # clip settings, tis_cap against rollout correction
        make_kl_controller(config)
    except ConfigError:
        raise
    except ValueError as error:  # the algorithm library's own checks name their keys
        raise ConfigError(str(error)) from error


def actor_loss_fn(config: Config) -> LossFn:
    loss_config = actor_loss_config(config)
    bypass = config.algorithm.rollout_correction.bypass_mode

    def loss_fn(
        output: LogprobOutput, micro: Mapping[str, torch.Tensor], mini: Mapping[str, torch.Tensor]
    ) -> tuple[torch.Tensor, dict[str, float]]:
        old, metrics = micro.get("old_logprobs"), {}
        if old is None:  # the old policy is this one (trainer.old_logprobs.from_update)
            old = output.logprobs.detach()
            if "rollout_logprobs" in micro:  # micro-batch means, averaged by the engine
                metrics = alg.mismatch_metrics(
                    old, micro["rollout_logprobs"], micro["response_mask"]
                )
            if bypass:  # ... or the rollout engine's, in bypass mode
                old = micro["rollout_logprobs"]
        denominator = alg.actor_loss_denominator(
            loss_config,
            mini.get("old_logprobs", old),  # read only by a rollout correction: never `old`
            mini["response_mask"],
            mini.get("rollout_logprobs"),
        )
        loss, loss_metrics = alg.actor_loss(
            output.logprobs,
            output.entropy,
            old,
            micro["advantages"],
            micro["response_mask"],
            loss_config,
            denominator,
            ref_logprobs=micro.get("ref_logprobs"),
            rollout_logprobs=micro.get("rollout_logprobs"),
        )
        return loss, metrics | loss_metrics

    return distillation.loss_fn(config, loss_fn)


def critic_loss_fn(config: Config) -> LossFn:
    critic = config.critic

    def loss_fn(
        values: torch.Tensor, micro: Mapping[str, torch.Tensor], mini: Mapping[str, torch.Tensor]
    ) -> tuple[torch.Tensor, dict[str, float]]:
        denominator = alg.loss_denominator(
            critic.loss_agg_mode,
            mini["response_mask"],
            loss_scale_factor=critic.loss_scale_factor,
        )
        return alg.value_loss(
            values,
            micro["values"],
            micro["returns"],
            micro["response_mask"],
            critic.cliprange_value,
            critic.loss_agg_mode,
            denominator,
        )

    return loss_fn


def make_kl_controller(config: Config) -> Any:
    ctrl = config.algorithm.kl_ctrl
    return alg.make_kl_controller(ctrl.type, ctrl.kl_coef, ctrl.target_kl, ctrl.horizon)


def kl_state(controller: Any) -> dict[str, float]:
    return {"value": controller.value}


def load_kl_state(controller: Any, state: dict[str, float]) -> None:
    controller.value = state["value"]


def assign_token_rewards(config: Config, batch: Batch, kl_ctrl: Any) -> dict[str, float]:
    """token_level_rewards = scores, minus the KL penalty when `use_kl_in_reward`; with
    `algorithm.reward_clip` the scores are clamped before the penalty and the token
    rewards after it (ROLL's order)."""
    bound, metrics = config.algorithm.reward_clip, {}
    scores = batch["token_level_scores"]
    if bound is not None:
        scores, share = alg.clip_values(scores, bound, batch["response_mask"])
        metrics["algorithm/reward_clip_frac"] = share
    if not config.algorithm.use_kl_in_reward:
        batch["token_level_rewards"] = scores
        return metrics
    rewards, seq_kl = alg.apply_kl_in_reward(
        scores,
        batch["old_logprobs"],
        batch["ref_logprobs"],
        batch["response_mask"],
        config.algorithm.kl_penalty,
        kl_ctrl.value,
    )
    if bound is not None:
        rewards, share = alg.clip_values(rewards, bound, batch["response_mask"])
        metrics["algorithm/token_reward_clip_frac"] = share
    batch["token_level_rewards"] = rewards
    current_kl = float(seq_kl.mean())
    kl_ctrl.update(current_kl, n_steps=batch["responses"].shape[0])
    coef = kl_ctrl.value
    return metrics | {"actor/reward_kl_penalty": current_kl, "actor/reward_kl_coef": coef}


def assign_advantages(
    config: Config, batch: Batch, uids: Sequence[str], reward_baselines: torch.Tensor | None = None
) -> dict[str, float]:
    """advantages and returns by the estimator, with ROLL's optional shaping around it
    (whiten_rewards before; whiten_advantages, then advantage_clip after); its metrics."""
    algorithm, mask = config.algorithm, batch["response_mask"]
    groups = alg.group_index(uids)
    # non-finite scores and all-equal groups, counted (TrainingHealth warns on the latter)
    scores = alg.sequence_sums(batch["token_level_scores"], mask)[0]
    metrics = alg.score_statistics(scores, groups)
    rewards = batch["token_level_rewards"]
    if algorithm.whiten_rewards:
        rewards = alg.whiten(rewards, mask, algorithm.whiten_style)
    advantages, returns = alg.compute_advantages(
        algorithm.adv_estimator,
        rewards,
        mask,
        values=batch.get("values"),
        group_index=groups,
        gamma=algorithm.gamma,
        lam=algorithm.lam,
        norm_adv_by_std=algorithm.norm_adv_by_std_in_grpo,
        grpo_std=algorithm.grpo_std,
        epsilon=algorithm.grpo_std_eps,
        reward_baselines=reward_baselines,
    )
    advantages = distillation.shape_advantages(config, batch, advantages)
    if algorithm.whiten_advantages:
        advantages = alg.whiten(advantages, mask, algorithm.whiten_style)
    if algorithm.advantage_clip is not None:
        advantages, share = alg.clip_values(advantages, algorithm.advantage_clip, mask)
        metrics["algorithm/advantage_clip_frac"] = share
    batch["advantages"], batch["returns"] = advantages, returns
    metrics["advantages/nonfinite_count"] = alg.nonfinite_count(advantages, mask)
    return metrics


def rollout_mismatch_metrics(config: Config, batch: Batch) -> dict[str, float]:
    """Trainer-vs-rollout-engine mismatch over the whole batch, and what the configured
    rollout correction does to it (IS weights, rejected and vetoed shares)."""
    old, rollout, mask = batch["old_logprobs"], batch["rollout_logprobs"], batch["response_mask"]
    metrics = alg.mismatch_metrics(old, rollout, mask)
    correction = actor_loss_config(config).correction
    if correction.enabled:
        metrics |= alg.rollout_correction_metrics(old, rollout, mask, correction)
    return metrics
