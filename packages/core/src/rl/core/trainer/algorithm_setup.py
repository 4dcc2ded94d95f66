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
    config: Config,
    batch: Batch,
    uids: Sequence[str],
    reward_baselines: torch.Tensor | None = None,
    *,
    accuracy: Sequence[float] | None = None,
    domains: Sequence[str] | None = None,
) -> dict[str, float]:
    """advantages and returns by the estimator, with ROLL's optional shaping around it
    (whiten_rewards before; whiten_advantages, then advantage_clip after) and its sample
    masks (`algorithm.max_len_mask`, `difficulty_mask` on each response's `accuracy`: the
    masked responses leave `response_mask`, so the updates skip them, and the whitening);
    with `algorithm.advantage_by_domain`, all of it within each of `domains`' rows (one
    domain per response). Returns its metrics."""
    algorithm, mask = config.algorithm, batch["response_mask"]
    groups = alg.group_index(uids)
    # non-finite scores and all-equal groups, counted (TrainingHealth warns on the latter)
    scores = alg.sequence_sums(batch["token_level_scores"], mask)[0]
    metrics = alg.score_statistics(scores, groups)
    keep, mask_metrics = _sample_mask(config, mask, groups, accuracy, scores)
    metrics |= mask_metrics
    kept = mask if keep is None else mask * keep[:, None].to(mask.dtype)
    parts = _domain_rows(domains) if algorithm.advantage_by_domain and domains else None
    rewards = batch["token_level_rewards"]
    if algorithm.whiten_rewards:
        rewards = _by_part(
            lambda r, m: alg.whiten(r, m, algorithm.whiten_style), parts, rewards, kept
        )
    whole = torch.arange(mask.shape[0])
    estimated = {
        name: _estimate(config, batch, rows, rewards, groups, reward_baselines)
        for name, rows in (parts or {"": whole}).items()
    }
    advantages, returns = _joined(estimated, parts, mask)
    advantages = distillation.shape_advantages(config, batch, advantages)
    if algorithm.whiten_advantages:
        whiten = lambda a, m: alg.whiten(a, m, algorithm.whiten_style)  # noqa: E731
        advantages = _by_part(whiten, parts, advantages, kept)
    if algorithm.advantage_clip is not None:
        advantages, share = alg.clip_values(advantages, algorithm.advantage_clip, kept)
        metrics["algorithm/advantage_clip_frac"] = share
    batch["advantages"], batch["returns"] = advantages, returns
    metrics["advantages/nonfinite_count"] = alg.nonfinite_count(advantages, kept)
    if keep is not None:
        batch["response_mask"] = kept  # ROLL's final_response_mask: the loss's tokens
    return metrics


def _estimate(
    config: Config,
    batch: Batch,
    rows: torch.Tensor,
    rewards: torch.Tensor,
    groups: torch.Tensor,
    reward_baselines: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The estimator's (advantages, returns) on the batch's `rows` (all of them: as is)."""
    algorithm = config.algorithm
    whole = rows.numel() == rewards.shape[0]
    values, mask = batch.get("values"), batch["response_mask"]
    if not whole:
        rewards, mask, groups = rewards[rows], mask[rows], alg.group_index(groups[rows])
        values = None if values is None else values[rows]
        reward_baselines = None if reward_baselines is None else reward_baselines[rows]
    return alg.compute_advantages(
        algorithm.adv_estimator,
        rewards,
        mask,
        values=values,
        group_index=groups,
        gamma=algorithm.gamma,
        lam=algorithm.lam,
        norm_adv_by_std=algorithm.norm_adv_by_std_in_grpo,
        grpo_std=algorithm.grpo_std,
        epsilon=algorithm.grpo_std_eps,
        reward_baselines=reward_baselines,
    )


def _sample_mask(
    config: Config,
    mask: torch.Tensor,
    groups: torch.Tensor,
    accuracy: Sequence[float] | None,
    scores: torch.Tensor,
) -> tuple[torch.Tensor | None, dict[str, float]]:
    """ROLL's sample masks (None when both are off) and its `actor/*mask_ratio` metrics."""
    algorithm = config.algorithm
    if not (algorithm.max_len_mask or algorithm.difficulty_mask):
        return None, {}
    keep = torch.ones(mask.shape[0])
    metrics = {}
    if algorithm.max_len_mask:
        lengths = mask.sum(dim=-1)
        by_length = alg.max_len_mask(lengths, config.data.max_response_length)
        keep, metrics["actor/max_len_mask_ratio"] = keep * by_length, float(by_length.mean())
    if algorithm.difficulty_mask:
        correct = scores.float() if accuracy is None else torch.tensor(list(accuracy))
        by_difficulty = alg.difficulty_mask(
            correct,
            groups,
            algorithm.difficulty_low_threshold,
            algorithm.difficulty_high_threshold,
        )
        keep = keep * by_difficulty
        metrics["actor/difficulty_mask_ratio"] = float(by_difficulty.mean())
    metrics["actor/final_mask_ratio"] = float(keep.mean())
    metrics["actor/samples_used"] = float(keep.sum())
    metrics["actor/samples_total"] = float(keep.numel())
    return keep, metrics


def _domain_rows(domains: Sequence[str]) -> dict[str, torch.Tensor]:
    """Each domain's row indices, in order of first appearance."""
    rows: dict[str, list[int]] = {}
    for index, domain in enumerate(domains):
        rows.setdefault(domain, []).append(index)
    return {name: torch.tensor(indices) for name, indices in rows.items()}


def _by_part(
    fn: Any, parts: dict[str, torch.Tensor] | None, values: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """`fn(values, mask)` over the whole batch, or within each part's rows."""
    if parts is None:
        return fn(values, mask)
    out = values.clone()
    for rows in parts.values():
        out[rows] = fn(values[rows], mask[rows])
    return out


def _joined(
    estimated: dict[str, tuple[torch.Tensor, torch.Tensor]],
    parts: dict[str, torch.Tensor] | None,
    mask: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    if parts is None:
        return estimated[""]
    advantages = torch.zeros(mask.shape, dtype=torch.float32)
    returns = torch.zeros(mask.shape, dtype=torch.float32)
    for name, rows in parts.items():
        part_advantages, part_returns = estimated[name]
        advantages = advantages.to(part_advantages.dtype)
        returns = returns.to(part_returns.dtype)
        advantages[rows], returns[rows] = part_advantages, part_returns
    return advantages, returns


def rollout_mismatch_metrics(config: Config, batch: Batch) -> dict[str, float]:
    """Trainer-vs-rollout-engine mismatch over the whole batch, and what the configured
    rollout correction does to it (IS weights, rejected and vetoed shares)."""
    old, rollout, mask = batch["old_logprobs"], batch["rollout_logprobs"], batch["response_mask"]
    metrics = alg.mismatch_metrics(old, rollout, mask)
    correction = actor_loss_config(config).correction
    if correction.enabled:
        metrics |= alg.rollout_correction_metrics(old, rollout, mask, correction)
    return metrics
