"""Score generated responses with the configured reward (rule-based, custom, or a model)."""

from __future__ import annotations

from itertools import pairwise
from typing import TYPE_CHECKING, Any

from rl.core.engines import Rollouts

if TYPE_CHECKING:
    from rl.core.rewards.overlong import ShapedScores
    from rl.core.trainer.context import RunContext


def score_rollouts(
    ctx: RunContext, items: list[Any], rollouts: Rollouts, n: int
) -> tuple[list[float], dict[str, float]]:
    """One score per response row (rows i*n .. i*n+n-1 answer prompt item i), from the
    text the model wrote, or an environment's episode return; shaped by the reward
    manager (`reward.reward_manager`: dapo's overlong penalty)."""
    shaped = score_rows(ctx, items, rollouts, n)
    return shaped.scores, shaped.metrics


def score_rows(ctx: RunContext, items: list[Any], rollouts: Rollouts, n: int) -> ShapedScores:
    """`score_rollouts`, with each row's values (its raw score, acc, the reward function's
    extras: what `algorithm.filter_groups.metric` filters on)."""
    return shape(ctx, raw_scores(ctx, items, rollouts, n), rollouts)


RawScores = tuple[list[float], list[dict[str, float]], dict[str, float]]


def shape(ctx: RunContext, raw: RawScores, rollouts: Rollouts) -> ShapedScores:
    """The reward manager's shaping (dapo's overlong penalty) of raw scores."""
    from rl.core.rewards.overlong import shape_scores

    scores, extras, metrics = raw
    config = ctx.config
    shaped = shape_scores(
        scores,
        extras,
        [len(ids) for ids in rollouts.response_ids],
        config.reward,
        config.data.max_response_length,
    )
    shaped.metrics = {**metrics, **shaped.metrics}
    return shaped


def raw_scores(
    ctx: RunContext, items: list[Any], rollouts: Rollouts, n: int
) -> tuple[list[float], list[dict[str, float]], dict[str, float]]:
    if rollouts.returns:  # played against an environment: its rewards are the scores
        returns = [float(value) for value in rollouts.returns]
        metrics = {"reward/env_return_mean": sum(returns) / max(len(returns), 1)}
        return returns, [], metrics
    if rollouts.answers:
        return _program_scores(ctx, items, rollouts, n)
    texts = ctx.tokenizer.batch_decode(model_tokens(rollouts), skip_special_tokens=True)
    return _scored_texts(ctx, items, rollouts, n, texts, list(range(len(texts))))


def _program_scores(ctx: RunContext, items: list[Any], rollouts: Rollouts, n: int) -> RawScores:
    """Agent programs' rows: the reward a program gave itself, else its answer scored by
    the run's reward; a failed program's row 0."""
    rows = len(rollouts.answers)
    scores = [0.0] * rows
    given = [i for i, r in enumerate(rollouts.answer_rewards) if r is not None]
    for row in given:
        scores[row] = float(rollouts.answer_rewards[row] or 0.0)
    asked = [
        i
        for i, answer in enumerate(rollouts.answers)
        if answer is not None and rollouts.answer_rewards[i] is None
    ]
    metrics = {"reward/agent_given": float(len(given))}
    extras: list[dict[str, float]] = [{} for _ in range(rows)]
    if asked:
        texts = [str(rollouts.answers[i]) for i in asked]
        found, found_extras, found_metrics = _scored_texts(ctx, items, rollouts, n, texts, asked)
        for row, score, extra in zip(asked, found, found_extras or [{}] * len(asked), strict=True):
            scores[row], extras[row] = score, extra
        metrics.update(found_metrics)
    metrics["reward/mean"] = sum(scores) / max(rows, 1)
    return scores, extras, metrics


def _scored_texts(
    ctx: RunContext, items: list[Any], rollouts: Rollouts, n: int, texts: list[str], rows: list[int]
) -> RawScores:
    """The run's reward on `texts`, the responses of rows `rows`."""
    from rl.core.rewards import RewardRequest
    from rl.core.rewards.domains import domain_metrics

    domains = [ctx.routing.domain_of(item) for item in items]
    requests = [
        RewardRequest(
            data_source=items[row // n].data_source,
            solution_str=text,
            ground_truth=items[row // n].ground_truth,
            extra_info=_extra_info(items[row // n].extra_info, rollouts, row),
            prompt_str=items[row // n].prompt_text,
            domain=domains[row // n],
            chat=items[row // n].chat,
        )
        for row, text in zip(rows, texts, strict=True)
    ]
    result = ctx.reward.score(requests)
    extras = list(result.extras) or [{} for _ in requests]
    by_row = [domains[row // n] for row in rows]
    metrics = {**domain_metrics(by_row, result.scores, extras), **result.metrics}
    return list(result.scores), list(result.extras), metrics


def _extra_info(row_info: dict[str, Any], rollouts: Rollouts, row: int) -> dict[str, Any]:
    """A response's `extra_info` as verl's reward managers build it: the row's own, plus
    `num_turns` (user and assistant turns; 2 for a single-turn response) and
    `rollout_reward_scores` (rewards the rollout gave on the way; none here)."""
    turns = 2
    if rollouts.loss_masks:  # agentic: each switch between model and tool tokens is a turn
        mask = rollouts.loss_masks[row]
        turns = 2 + sum(1 for a, b in pairwise(mask) if a != b)
    return {**row_info, "num_turns": turns, "rollout_reward_scores": {}}


def model_tokens(rollouts: Rollouts) -> list[list[int]]:
    """What the model wrote in each row: agentic rows without their tool / environment
    turns (a reward must not score what a tool printed)."""
    if not rollouts.loss_masks:
        return rollouts.response_ids
    return [
        [token for token, keep in zip(ids, mask, strict=True) if keep]
        for ids, mask in zip(rollouts.response_ids, rollouts.loss_masks, strict=True)
    ]
