"""DAPO's dynamic sampling (`algorithm.filter_groups`), as verl's DAPO trainer runs it.

A step draws `data.gen_batch_size` prompts at a time from the sampler, generates and scores
their groups, and keeps the groups whose `filter_groups.metric` differs among their n
samples (`algorithms.informative_groups`); it draws again until `data.train_batch_size`
groups are kept, then trains on the first `train_batch_size` of them. After
`filter_groups.max_num_gen_batches` (> 0) batches without enough, the run stops with a
`TrainingError`, as verl's raises. The sampler's position moves with every batch drawn
and is checkpointed after the step: a resumed run draws what an unbroken one draws.

Metrics: `train/num_gen_batches` (verl's name), `dynamic_sampling/kept_groups` and
`dynamic_sampling/dropped_groups` (over the step's generation batches); the generation and
reward metrics of the step are means over its generation batches.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, Any

import torch

from rl.core.algorithms.group_filter import informative_groups
from rl.core.algorithms.groups import group_rows, prompt_uids
from rl.core.engines import Rollouts
from rl.core.errors import TrainingError
from rl.core.trainer.rollout_batch import build_batch, scores_to_token_level
from rl.core.trainer.step import Collected, generate, learn, score, sync
from rl.core.trainer.timers import PhaseTimer

if TYPE_CHECKING:
    from rl.core.trainer.context import RunContext

# the response's (shaped) reward; `reward` is verl 0.9's name of it
SEQUENCE_METRICS = ("seq_reward", "seq_final_reward", "reward")


def filtered_step(ctx: RunContext, step: int, kl_ctrl: Any) -> dict[str, float]:
    """One sync-mode step with dynamic sampling; returns its metrics."""
    collected = collect(ctx, step)
    return sync(ctx, collected, learn(ctx, collected, kl_ctrl), version=step + 1)


def collect(ctx: RunContext, step: int) -> Collected:
    """Generate and score batches of prompts until `data.train_batch_size` groups are kept;
    the step's `Collected`, trimmed to exactly that many groups."""
    config = ctx.config
    n, wanted = config.rollout.n, config.data.train_batch_size
    filtering = config.algorithm.filter_groups
    parts: list[tuple[Collected, list[bool]]] = []
    kept = dropped = 0
    while kept < wanted:
        items = [ctx.train_data[i] for i in ctx.sampler.next_batch()]
        part = score(ctx, generate(ctx, items, step, gen_batch=len(parts)))
        keep = informative_groups(metric_values(part, filtering.metric), n)
        parts.append((part, keep))
        kept += sum(keep)
        dropped += len(keep) - sum(keep)
        cap = filtering.max_num_gen_batches
        if kept < wanted and 0 < cap <= len(parts):
            raise TrainingError(
                f"step {step + 1}: {len(parts)} generation batches (algorithm.filter_groups."
                f"max_num_gen_batches = {cap}) kept {kept} groups whose "
                f"{filtering.metric} differs among their samples, fewer than "
                f"data.train_batch_size = {wanted}: the data is too hard (or too easy) for "
                "the model; raise max_num_gen_batches, or set it to 0 for no limit"
            )
    collected = merge(ctx, step, parts, wanted)
    collected.metrics |= {
        "train/num_gen_batches": float(len(parts)),
        "dynamic_sampling/kept_groups": float(kept),
        "dynamic_sampling/dropped_groups": float(dropped),
    }
    return collected


def metric_values(part: Collected, metric: str | None) -> list[float]:
    """Each response's value of the filter metric: its reward (`seq_reward`, `reward`;
    also `seq_final_reward`, which equals it where no KL penalty enters the reward: the config
    refuses it with one), or a value the reward stage recorded (`score`, `acc`, a reward
    function's own keys). A row that failed to score has only its `score`."""
    if metric in SEQUENCE_METRICS:
        return part.batch["token_level_scores"].to(torch.float64).sum(1).tolist()
    assert metric is not None  # checked by the config
    if not any(metric in row for row in part.rows):
        known = sorted({key for row in part.rows for key in row} | set(SEQUENCE_METRICS))
        raise TrainingError(
            f"algorithm.filter_groups.metric = {metric}: the reward stage recorded no such "
            f"value (recorded: {', '.join(known)}); `acc` is recorded by "
            "reward.reward_manager = dapo, or returned by a reward function as a dict key"
        )
    return [float(row.get(metric, row["score"])) for row in part.rows]


def merge(
    ctx: RunContext, step: int, parts: Sequence[tuple[Collected, list[bool]]], wanted: int
) -> Collected:
    """The kept groups of `parts`, in order, the first `wanted` of them, as one batch."""
    n = ctx.config.rollout.n
    items: list[Any] = []
    sources: list[tuple[Collected, int]] = []  # (part, row in it) for each kept response
    uids: list[str] = []
    for index, (part, keep) in enumerate(parts):
        for group, item in enumerate(part.items):
            if keep[group] and len(items) < wanted:
                items.append(item)
                sources.extend((part, row) for row in group_rows(group, n))
                uids.extend(prompt_uids(step, [item.index], n, draw=index))
    rollouts = _select_rollouts(sources)
    config = ctx.config
    batch = build_batch(rollouts, ctx.tokenizer.pad_token_id, config.data.max_response_length)
    scores = [float(part.batch["token_level_scores"][row].sum()) for part, row in sources]
    batch["token_level_scores"] = scores_to_token_level(scores, batch["response_mask"])
    timer = PhaseTimer()
    for part, _ in parts:
        for name, seconds in part.timer.seconds.items():
            timer.seconds[name] = timer.seconds.get(name, 0.0) + seconds
    return Collected(
        items,
        batch,
        uids,
        _mean_metrics([part.metrics for part, _ in parts]),
        timer,
        rollouts,
        [part.rows[row] for part, row in sources],
    )


def _select_rollouts(sources: Sequence[tuple[Collected, int]]) -> Rollouts:
    """The rows `sources` of their parts' rollouts, as one `Rollouts`; a per-row field is
    kept when every part has it."""

    def column(name: str) -> list[Any]:
        values = [getattr(part.rollouts, name) for part, _ in sources]
        if name == "images" and any(values):  # a draw of text prompts only: rows without
            return [  # images, beside the other draws' rows that keep theirs
                part.rollouts.images[row] if part.rollouts.images else None for part, row in sources
            ]
        if not all(values):
            return []
        return [getattr(part.rollouts, name)[row] for part, row in sources]

    # Every field, whatever the engines add (routing replay's routed_experts, ...).
    return Rollouts(**{field.name: column(field.name) for field in fields(Rollouts)})


def _mean_metrics(metrics: Sequence[dict[str, float]]) -> dict[str, float]:
    keys = {key for part in metrics for key in part}
    out = {}
    for key in sorted(keys):
        values = [part[key] for part in metrics if key in part]
        out[key] = sum(values) / len(values)
    return out
