"""Scoring while generating (`reward.stream_chunks`): a step's prompts are generated in
chunks of whole groups, one after another, and each chunk is scored in the background
while the next generates; the last chunk's scoring overlaps the log-prob passes (`learn`
waits for all of it there, as for `reward.launch_reward_fn_async`).

Nothing trained changes: each prompt's samples draw on its own seeds
(`SamplingParams.for_prompts`), so a chunk samples what the whole batch would have; the
chunks' raw scores are put back in batch order and shaped once, and the per-domain
metrics are computed over the whole batch. What the reward reports per call is merged:
counts, errors, timeouts and times summed, error rates the largest, other figures
weighted by the chunk's responses (a domain's figures by the domain's responses).
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from rl.core.algorithms.groups import prompt_uids
from rl.core.engines import Rollouts, concat_rollouts
from rl.core.trainer import agentic
from rl.core.trainer.rollout_batch import build_batch
from rl.core.trainer.scoring import RawScores, raw_scores, shape
from rl.core.trainer.timers import PhaseTimer

if TYPE_CHECKING:
    from rl.core.trainer.context import RunContext
    from rl.core.trainer.step import Collected

_SUMMED = ("/errors", "/timeouts", "/time_s", "/count")


def chunk_bounds(prompts: int, chunks: int) -> list[tuple[int, int]]:
    """[start, end) of `chunks` runs of prompts as even as they come (none empty)."""
    chunks = max(1, min(chunks, prompts))
    size, extra = divmod(prompts, chunks)
    bounds, start = [], 0
    for index in range(chunks):
        end = start + size + (index < extra)
        bounds.append((start, end))
        start = end
    return bounds


def merge_raw(parts: list[RawScores], sizes: list[int]) -> RawScores:
    """The chunks' raw scores in order; their reward metrics merged (module docstring)."""
    scores = [score for part in parts for score in part[0]]
    if all(not part[1] for part in parts):
        extras: list[dict[str, float]] = []
    else:
        extras = [
            row for part, size in zip(parts, sizes, strict=True) for row in part[1] or [{}] * size
        ]
    keys = {key for part in parts for key in part[2]}
    total = max(sum(sizes), 1)
    metrics: dict[str, float] = {}
    for key in keys:
        values = [
            (part[2][key], _weight(part[2], key, size))
            for part, size in zip(parts, sizes, strict=True)
            if key in part[2]
        ]
        if key.endswith(_SUMMED):
            metrics[key] = sum(value for value, _ in values)
        elif key.endswith("error_rate"):
            metrics[key] = max(value for value, _ in values)
        else:
            weights = sum(weight for _, weight in values) or total
            metrics[key] = sum(value * weight for value, weight in values) / weights
    return scores, extras, metrics


def _weight(metrics: dict[str, float], key: str, size: int) -> float:
    """A figure's weight in its chunk: a domain's (`reward/<d>/...`) its responses there,
    any other the chunk's."""
    parts = key.split("/")
    if len(parts) == 3 and parts[0] == "reward":
        return metrics.get(f"reward/{parts[1]}/count", size)
    return size


def generate_streaming(
    ctx: RunContext, items: list[Any], step: int
) -> tuple[Collected, Future[tuple[Any, float]]]:
    """`step.generate` in `reward.stream_chunks` chunks, each scored in the background as
    soon as it is generated; the future answers (shaped scores, seconds spent scoring)."""
    from rl.core.rewards.domains import domain_metrics
    from rl.core.trainer.step import Collected, step_sampling, weight_version_metrics

    config, timer = ctx.config, PhaseTimer()
    n = config.rollout.n
    sampling = step_sampling(config, step, len(items))  # as the unchunked step's
    bounds = chunk_bounds(len(items), config.reward.stream_chunks)
    scorer = ThreadPoolExecutor(1, thread_name_prefix="reward")
    parts: list[Rollouts] = []
    scored: list[Future[tuple[RawScores, float]]] = []

    def score_chunk(chunk: list[Any], rollouts: Rollouts) -> tuple[RawScores, float]:
        started = time.perf_counter()
        return raw_scores(ctx, chunk, rollouts, n), time.perf_counter() - started

    with timer.phase("generate"):
        for start, end in bounds:
            share = sampling.for_prompts(range(start, end))
            rollouts, _ = agentic.generate(ctx, items[start:end], share)
            parts.append(rollouts)
            scored.append(scorer.submit(score_chunk, items[start:end], rollouts))
    scorer.shutdown(wait=False)
    rollouts = concat_rollouts(parts)
    metrics = {
        **weight_version_metrics(config, rollouts, step),
        "reward/stream_chunks": float(len(bounds)),
    }
    batch = build_batch(rollouts, ctx.tokenizer.pad_token_id, config.data.max_response_length)
    uids = prompt_uids(step, [it.index for it in items], n)
    collected = Collected(items, batch, uids, metrics, timer, rollouts)

    def gather() -> tuple[Any, float]:
        answers = [future.result() for future in scored]
        sizes = [(end - start) * n for start, end in bounds]
        scores, extras, merged = merge_raw([raw for raw, _ in answers], sizes)
        domains = [ctx.routing.domain_of(item) for item in items for _ in range(n)]
        rows = extras or [{} for _ in scores]
        merged.update(domain_metrics(domains, scores, rows))
        shaped = shape(ctx, (scores, extras, merged), rollouts)
        return shaped, sum(seconds for _, seconds in answers)

    waiter = ThreadPoolExecutor(1, thread_name_prefix="reward-gather")
    future = waiter.submit(gather)
    waiter.shutdown(wait=False)
    return collected, future
