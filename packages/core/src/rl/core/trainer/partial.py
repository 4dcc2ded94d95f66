"""Partial rollouts (`trainer.partial_rollout`, with `trainer.mode: one_step_off | async`):
a step's generation runs in pieces of `trainer.partial_rollout_chunk` tokens, and the
rollout engine is free between pieces, so a weight push waits for one piece, not for the
whole step's generation. An interrupted response continues under the new weights from
exactly the tokens it has (token in / token out: its prompt and response so far are the
next piece's prompt). Every token keeps the log-prob of the weights that sampled it (the
behaviour policy that rollout correction weighs against) and the policy version of those
weights (`Rollouts.policy_versions`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any

from rl.core.engines import Rollouts, SamplingParams
from rl.core.rng import prompt_seeds


@dataclass(frozen=True)
class Interruptible:
    """How a producer shares the engine: `hold()` while a piece generates, `version()`
    the policy version of the weights the engine holds (read while holding it)."""

    hold: Callable[[], AbstractContextManager[object]]
    version: Callable[[], int]
    chunk: int


def generate_in_pieces(
    engine: Any,
    prompt_ids: Sequence[Sequence[int]],
    sampling: SamplingParams,
    control: Interruptible,
) -> Rollouts:
    """`sampling.n` responses per prompt (grouped as `generate` groups them), generated
    piece by piece; a response ends at a stop token or at `sampling.max_new_tokens`."""
    prompts = [list(p) for p in prompt_ids for _ in range(sampling.n)]
    count = len(prompts)
    ids: list[list[int]] = [[] for _ in range(count)]
    logprobs: list[list[float]] = [[] for _ in range(count)]
    versions: list[list[int]] = [[] for _ in range(count)]
    reasons = ["length"] * count
    open_rows = list(range(count))
    row_seeds = sampling.sample_seeds(len(prompt_ids))
    while open_rows:
        budget = min(control.chunk, *(sampling.max_new_tokens - len(ids[r]) for r in open_rows))
        # a piece of a seeded sample draws from (its seed, where the piece starts)
        seeds = (
            ()
            if row_seeds is None
            else tuple(prompt_seeds(row_seeds[r], len(ids[r]), count=1)[0] for r in open_rows)
        )
        piece = replace(sampling, n=1, max_new_tokens=budget, seed=None, prompt_seeds=seeds)
        with control.hold():
            version = control.version()
            out = engine.generate([prompts[r] + ids[r] for r in open_rows], piece)
        still_open = []
        for at, row in enumerate(open_rows):
            ids[row] += out.response_ids[at]
            logprobs[row] += out.logprobs[at]
            versions[row] += [version] * len(out.response_ids[at])
            stopped = bool(out.finish_reasons) and out.finish_reasons[at] == "stop"
            if stopped:
                reasons[row] = "stop"
            elif len(ids[row]) < sampling.max_new_tokens:
                still_open.append(row)
        open_rows = still_open
    # a row's weight version: the oldest weights that wrote any of it
    oldest = [min(row, default=control.version()) for row in versions]
    return Rollouts(
        prompts, ids, logprobs, reasons, policy_versions=versions, weight_versions=oldest
    )


def version_metrics(rollouts: Rollouts, step: int) -> dict[str, float]:
    """Staleness per token (updates between the weights that sampled it and step `step`'s)
    and the share of responses that more than one policy version wrote."""
    rows = [v for v in rollouts.policy_versions if v]
    tokens = [step - version for row in rows for version in row]
    if not tokens:
        return {}
    return {
        "rollout/token_staleness_mean": sum(tokens) / len(tokens),
        "rollout/token_staleness_max": float(max(tokens)),
        "rollout/partial_rate": sum(len(set(row)) > 1 for row in rows) / len(rows),
    }
