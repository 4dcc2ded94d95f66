"""One RL step, as data flows (docs/architecture.md, "One RL step, as data flows"):

prompts -> generate -> rewards -> old/ref log-probs, values -> advantages
-> critic update -> actor update -> weight sync.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import torch

from rl.core.algorithms.groups import prompt_uids
from rl.core.batch import Batch
from rl.core.engines import Rollouts, SamplingParams
from rl.core.errors import TrainingError
from rl.core.rng import prompt_seeds
from rl.core.trainer import agentic, algorithm_setup, distillation
from rl.core.trainer.old_logprobs import from_update
from rl.core.trainer.perf import actor_perf_metrics
from rl.core.trainer.rollout_batch import build_batch, scores_to_token_level
from rl.core.trainer.sampling import train_sampling
from rl.core.trainer.scoring import score_rollouts, score_rows
from rl.core.trainer.timers import PhaseTimer

if TYPE_CHECKING:
    from rl.core.rewards.overlong import ShapedScores
    from rl.core.trainer.context import RunContext


@dataclass
class Collected:
    """A step's generated rollouts and their batch (scored by `score`; `rows`: each
    response's reward values, what dynamic sampling filters on)."""

    items: list[Any]
    batch: Batch
    uids: list[str]
    metrics: dict[str, float]
    timer: PhaseTimer
    rollouts: Rollouts
    rows: list[dict[str, float]] = field(default_factory=list)


def generate(
    ctx: RunContext, items: list[Any], step: int, pieces: Any = None, gen_batch: int = 0
) -> Collected:
    """Generate the rollouts of the prompts `items` (the weights the rollout engine holds
    now decide them: one step old in `trainer.mode: one_step_off`; with `pieces`, partial
    rollouts, the weights of the moment decide each piece). Each sample's randomness comes
    from (seeds, step, the prompt's place in the batch, its sample index) alone
    (`SamplingParams.prompt_seeds`): 1 rank or N, colocated or not, sample alike.
    `gen_batch` > 0: the step's further generation batches (dynamic sampling) draw their
    own seeds."""
    config, timer = ctx.config, PhaseTimer()
    sampling = step_sampling(config, step, len(items), gen_batch)
    with timer.phase("generate"):
        rollouts, agent_metrics = agentic.generate(ctx, items, sampling, pieces)
    metrics = {**agent_metrics, **weight_version_metrics(config, rollouts, step)}
    batch = build_batch(rollouts, ctx.tokenizer.pad_token_id, config.data.max_response_length)
    uids = prompt_uids(step, [it.index for it in items], config.rollout.n)
    return Collected(items, batch, uids, metrics, timer, rollouts)


def step_sampling(config: Any, step: int, prompts: int, gen_batch: int = 0) -> SamplingParams:
    """The training sampling of `step`'s `prompts` prompts, each with its own seed (the
    step's further generation batches, `gen_batch` > 0, draw their own)."""
    key = ("train", step, *((f"gen{gen_batch}",) if gen_batch else ()))
    seeds = prompt_seeds(config.trainer.seed, config.rollout.seed, *key, count=prompts)
    return replace(train_sampling(config), prompt_seeds=seeds)


def max_lag(config: Any) -> int:
    """How many updates the weights that generate step s's rollouts may lag behind the s
    updates step s trains on: none in sync mode, one in one-step-off, max_staleness in
    async mode."""
    trainer = config.trainer
    return {"sync": 0, "one_step_off": 1}.get(trainer.mode, trainer.max_staleness)


def weight_version_metrics(config: Any, rollouts: Rollouts, step: int) -> dict[str, float]:
    """`rollout/weight_version_lag` (the most updates any sample's weights lacked), after
    checking every sample's recorded weight version against the mode's bound: a sync that
    never reached a replica is an error, not a silent off-policy run."""
    versions = rollouts.weight_versions
    if not versions:
        return {}  # not recorded (agent loops: their turns are requests of their own)
    lag = step - min(versions)
    if lag > max_lag(config) or max(versions) > step:
        raise TrainingError(
            f"step {step}'s rollouts came from weights of versions {min(versions)} to "
            f"{max(versions)} (updates held), beyond what trainer.mode = "
            f"{config.trainer.mode} allows ({max_lag(config)} behind): a weight sync did "
            "not reach every rollout replica"
        )
    return {"rollout/weight_version_lag": float(lag)}


def score(ctx: RunContext, collected: Collected) -> Collected:
    """Score the rollouts (in the main thread: reward timeouts use SIGALRM there)."""
    with collected.timer.phase("reward"):
        shaped = score_rows(ctx, collected.items, collected.rollouts, ctx.config.rollout.n)
    return _scored(collected, shaped)


def score_in_background(ctx: RunContext, collected: Collected) -> Future[tuple[Any, float]]:
    """Start scoring the rollouts in a thread (`reward.launch_reward_fn_async`: the config
    makes rule scoring run in the pool then, whose timeouts work off the main thread);
    `learn` waits for it after the log-prob passes. The future answers (scores, seconds)."""

    def run() -> tuple[Any, float]:
        started = time.perf_counter()
        shaped = score_rows(ctx, collected.items, collected.rollouts, ctx.config.rollout.n)
        return shaped, time.perf_counter() - started

    executor = ThreadPoolExecutor(1, thread_name_prefix="reward")
    future = executor.submit(run)
    executor.shutdown(wait=False)
    return future


def _scored(collected: Collected, shaped: ShapedScores) -> Collected:
    batch = collected.batch
    batch["token_level_scores"] = scores_to_token_level(shaped.scores, batch["response_mask"])
    collected.metrics.update(shaped.metrics)
    collected.rows = shaped.rows
    return collected


def learn(
    ctx: RunContext,
    collected: Collected,
    kl_ctrl: Any,
    release_rollout: bool = True,
    scoring: Future[tuple[Any, float]] | None = None,
) -> dict[str, float]:
    """Old / reference log-probs, values, advantages and the critic and actor updates on
    `collected`; `release_rollout` frees the rollout engine's memory meanwhile (not while
    it generates the next step, in one-step-off mode). With `scoring` (started by
    `score_in_background`), the scores are awaited after the log-prob passes: the wait is
    `timing/reward`, the scoring itself `timing/reward_background` (not in the step's sum)."""
    config, batch, timer = ctx.config, collected.batch, collected.timer
    n = config.rollout.n
    prepared = _prepare(ctx, batch, timer)
    if scoring is not None:
        with timer.phase("reward"):
            shaped, seconds = scoring.result()
        _scored(collected, shaped)
        collected.metrics["timing/reward_background"] = seconds
    metrics = {**collected.metrics, **prepared}
    baselines = None
    if config.algorithm.adv_estimator == "remax":
        with timer.phase("greedy_baseline"):
            baselines = greedy_baselines(ctx, collected.items, config.rollout.n)
    responses = batch["response_mask"]  # the sample masks narrow it for the updates only
    with timer.phase("advantages"):
        reward_kl_metrics = algorithm_setup.assign_token_rewards(config, batch, kl_ctrl)
        reward_kl_metrics |= algorithm_setup.assign_advantages(
            config,
            batch,
            collected.uids,
            reward_baselines=baselines,
            accuracy=[row.get("acc", row["score"]) for row in collected.rows] or None,
            domains=[ctx.routing.domain_of(it) for it in collected.items for _ in range(n)],
        )
    metrics.update(reward_kl_metrics)
    if release_rollout:
        ctx.rollout.sleep()  # generation is over until the sync: free its memory for updates
    if not batch["response_mask"].any():  # every response masked: ROLL skips the updates
        metrics["mask/final_mask_sum_eq_0"] = 1.0
        batch["response_mask"] = responses
        return metrics
    if ctx.critic is not None:
        with timer.phase("update_critic"):
            metrics.update(ctx.critic.train_step(batch, algorithm_setup.critic_loss_fn(config)))
    with timer.phase("update_actor"):
        update = ctx.actor.train_step(batch, algorithm_setup.actor_loss_fn(config))
    metrics.update(update)
    shared = "actor/prompt_tokens_shared" in update  # the engine packed prompts once
    metrics.update(actor_perf_metrics(config, batch, timer.seconds["update_actor"], shared))
    batch["response_mask"] = responses  # the step's metrics count every response
    return metrics


def sync(
    ctx: RunContext,
    collected: Collected,
    metrics: dict[str, float],
    version: int,
    push_weights: bool = True,
) -> dict[str, float]:
    """The updated weights (`version`: the updates they hold) into the rollout engine
    (unless not `push_weights`: async mode between its pushes); the step's batch and timing
    metrics."""
    if push_weights:
        with collected.timer.phase("sync"):
            ctx.rollout.wake()
            metrics.update(ctx.sync_weights(version))
    metrics.update(batch_metrics(collected.batch))
    metrics.update(collected.timer.metrics())
    return metrics


def rl_step(ctx: RunContext, items: list[Any], step: int, kl_ctrl: Any) -> dict[str, float]:
    """Run one step on the prompts `items`; returns its metrics."""
    if ctx.config.reward.stream_chunks > 1:  # scored chunk by chunk while generating
        from rl.core.trainer.streaming import generate_streaming

        collected, scoring = generate_streaming(ctx, items, step)
        return sync(ctx, collected, learn(ctx, collected, kl_ctrl, scoring=scoring), step + 1)
    collected = generate(ctx, items, step)
    if ctx.config.reward.launch_reward_fn_async:
        scoring = score_in_background(ctx, collected)
        return sync(ctx, collected, learn(ctx, collected, kl_ctrl, scoring=scoring), step + 1)
    collected = score(ctx, collected)
    return sync(ctx, collected, learn(ctx, collected, kl_ctrl), version=step + 1)


def greedy_baselines(ctx: RunContext, items: list[Any], n: int) -> torch.Tensor:
    """ReMax's baseline: the reward of each prompt's greedy response, repeated for its n rows."""
    sampling = train_sampling(ctx.config)
    greedy = replace(sampling, n=1, temperature=0.0, top_p=1.0, top_k=-1)
    prompt_ids, images = [it.prompt_ids for it in items], [it.images for it in items]
    if any(image is not None for image in images):
        rollouts = agentic.generate_with_images(ctx, prompt_ids, images, greedy)
    else:
        rollouts = ctx.rollout.generate(prompt_ids, greedy)
    scores, _ = score_rollouts(ctx, items, rollouts, 1)
    return torch.tensor(scores, dtype=torch.float32).repeat_interleave(n)


def _prepare(ctx: RunContext, batch: Batch, timer: PhaseTimer) -> dict[str, float]:
    """Old and reference log-probs and critic values, added to `batch`. The old ones only
    when the update cannot give them itself (`old_logprobs.from_update`); then the actor's
    loss takes them from its forward, and reports the rollout mismatch there."""
    reused = from_update(ctx.config, batch["responses"].shape[0])
    metrics = {"actor/old_logprobs_from_update": float(reused)}
    if not reused:
        with timer.phase("old_logprob"):
            old = ctx.actor.compute_logprobs(batch, False)
            batch["old_logprobs"] = old.logprobs
            if old.routed_experts is not None:  # routing replay R2: the updates replay them
                batch["routed_experts"] = old.routed_experts
        metrics |= algorithm_setup.rollout_mismatch_metrics(ctx.config, batch)
    if ctx.ref is not None:
        with timer.phase("ref"):
            batch["ref_logprobs"] = ctx.ref.compute_logprobs(batch, False).logprobs
    metrics |= distillation.add_teacher_logprobs(ctx, batch, timer)
    if ctx.critic is not None:
        with timer.phase("values"):
            batch["values"] = ctx.critic.compute_values(batch)
    return metrics


def batch_metrics(batch: Batch) -> dict[str, float]:
    mask = batch["response_mask"]
    lengths = mask.sum(1)
    scores = batch["token_level_scores"].to(torch.float64).sum(1)
    out = {
        "response/length_mean": float(lengths.mean()),
        "response/length_max": float(lengths.max()),
        "response/clip_ratio": float((lengths >= mask.shape[1]).float().mean()),
        "reward/score_mean": float(scores.mean()),
    }
    for key in ("advantages", "returns", "values"):
        if key in batch:
            valid = batch[key][mask.bool()]
            out[f"{key}/mean"] = float(valid.mean()) if valid.numel() else 0.0
            out[f"{key}/max"] = float(valid.max()) if valid.numel() else 0.0
            out[f"{key}/min"] = float(valid.min()) if valid.numel() else 0.0
    return out
