"""The reward manager's last touch (`reward.reward_manager`): verl's naive manager keeps the
scores as the reward function gave them; its DAPO manager adds the overlong penalty
(`reward.overlong_buffer`) and records each response's `acc`. Per response, the values
dynamic sampling may filter on (`algorithm.filter_groups.metric`) are kept beside the
scores."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from rl.core.algorithms.overlong import overlong_penalty


@dataclass
class ShapedScores:
    """`scores`: each response's reward (shaped); `rows`: per response, `score` (as the
    reward function gave it), `acc`, the function's other numeric extras and, shaped,
    `overlong_reward` and `overlong` (1.0 when penalised); `metrics`: the batch's."""

    scores: list[float]
    rows: list[dict[str, float]]
    metrics: dict[str, float] = field(default_factory=dict)


def shape_scores(
    scores: Sequence[float],
    extras: Sequence[dict[str, float]],
    lengths: Sequence[int],
    reward_config: Any,
    max_response_length: int,
) -> ShapedScores:
    """Apply `reward_config.reward_manager`'s rule to the raw `scores` of responses of
    `lengths` tokens (their whole response: verl counts the response's attention mask)."""
    extras = list(extras) or [{} for _ in scores]
    rows = [{**extra, "score": float(score)} for score, extra in zip(scores, extras, strict=True)]
    if reward_config.reward_manager != "dapo":
        return ShapedScores([float(s) for s in scores], rows)
    for row in rows:  # verl's DAPO manager records a plain number's score as its acc
        row.setdefault("acc", row["score"])
    buffer = reward_config.overlong_buffer
    if not buffer.enable:
        return ShapedScores([float(s) for s in scores], rows)
    max_len = buffer.max_resp_len or max_response_length
    penalty = overlong_penalty(
        torch.tensor(list(lengths), dtype=torch.long), max_len, buffer.len, buffer.penalty_factor
    ).tolist()
    shaped = [float(score) + value for score, value in zip(scores, penalty, strict=True)]
    metrics: dict[str, float] = {}
    if buffer.log:
        for row, value in zip(rows, penalty, strict=True):
            row["overlong_reward"], row["overlong"] = value, float(value < 0)
        count = max(len(penalty), 1)
        metrics["reward/overlong_reward"] = sum(penalty) / count
        metrics["reward/overlong"] = sum(value < 0 for value in penalty) / count
    return ShapedScores(shaped, rows, metrics)
