"""What a reward function is asked and what it answers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

OK, ERROR, TIMEOUT = "ok", "error", "timeout"


@dataclass(frozen=True)
class RewardRequest:
    data_source: str
    solution_str: str
    ground_truth: Any
    extra_info: dict[str, Any] | None = None
    prompt_str: str = ""
    domain: str = ""  # its reward domain (reward.domains; else its data_source)
    chat: list[dict[str, Any]] | None = None  # the prompt's chat messages (None: plain text)


class ScoreOutcome(NamedTuple):
    """One response's score; a failed one (`status` ERROR or TIMEOUT) scores 0 and `error` says
    why, e.g. "ValueError: boom (my_reward.py, line 7)" or "returned nan"."""

    score: float
    status: str  # OK | ERROR | TIMEOUT
    extras: dict[str, float]
    error: str = ""


@dataclass
class RewardResult:
    """One score per request, and metrics (`reward/mean`, `reward/errors`, `reward/timeouts`,
    `reward/error_rate`); `errors` holds each request's failure text ("" when it scored),
    `extras` each request's other numeric entries of a dict result (empty when none or
    not recorded)."""

    scores: list[float]
    metrics: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    extras: list[dict[str, float]] = field(default_factory=list)
