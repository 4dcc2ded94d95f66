"""Validation: greedy (by default) generation over the validation set, scored."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rl.core.engines import SamplingParams
from rl.core.rng import prompt_seeds
from rl.core.trainer import agentic
from rl.core.trainer.sampling import val_sampling
from rl.core.trainer.scoring import score_rollouts

if TYPE_CHECKING:
    from rl.core.trainer.context import RunContext


def val_seeds(config: Any, count: int) -> tuple[int, ...]:
    """Each validation prompt's sampling seed: the same at every validation (the curve
    compares the policies on the same random draws) and on any placement."""
    return prompt_seeds(config.trainer.seed, config.rollout.seed, "val", count=count)


def generate_scored(
    ctx: RunContext, sampling: SamplingParams, score: bool = True
) -> tuple[list[Any], list[float], list[str]]:
    """The validation items, and for each of their `sampling.n` responses (item-major) its
    score (none when not `score`) and text, generated in chunks of `data.val_batch_size`
    prompts."""
    items = [ctx.val_data[i] for i in range(len(ctx.val_data))]
    scores: list[float] = []
    texts: list[str] = []
    for start in range(0, len(items), ctx.config.data.val_batch_size):
        chunk = items[start : start + ctx.config.data.val_batch_size]
        seeds = val_seeds(ctx.config, len(items))[start : start + len(chunk)]
        rollouts, _ = agentic.generate(ctx, chunk, replace(sampling, prompt_seeds=seeds))
        if score:
            scores += score_rollouts(ctx, chunk, rollouts, sampling.n)[0]
        texts += ctx.tokenizer.batch_decode(rollouts.response_ids, skip_special_tokens=True)
    return items, scores, texts


def validate(ctx: RunContext) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """`val/reward_mean`, `val/accuracy` (share of responses scored > 0), per reward domain
    too (`reward.domains`; else per data source);
    and the first `trainer.log_val_generations` samples."""
    config, sampling = ctx.config, val_sampling(ctx.config)
    items, scores, texts = generate_scored(ctx, sampling)
    by_source: dict[str, list[float]] = defaultdict(list)  # by reward domain (data source)
    for row, score in enumerate(scores):
        by_source[ctx.routing.domain_of(items[row // sampling.n])].append(score)
    metrics = {
        "val/reward_mean": sum(scores) / max(len(scores), 1),
        "val/accuracy": sum(s > 0 for s in scores) / max(len(scores), 1),
    }
    for source, values in by_source.items():
        metrics[f"val/{source}/accuracy"] = sum(v > 0 for v in values) / len(values)
    samples = [
        {
            "prompt": items[row // sampling.n].prompt_text,
            "response": texts[row],
            "ground_truth": str(items[row // sampling.n].ground_truth),
            "score": scores[row],
        }
        for row in range(min(config.trainer.log_val_generations, len(scores)))
    ]
    return metrics, samples
