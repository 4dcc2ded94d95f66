"""What a reward function is asked and what it answers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RewardRequest:
    data_source: str
    solution_str: str
    ground_truth: Any
    extra_info: dict[str, Any] | None = None
    prompt_str: str = ""


@dataclass
class RewardResult:
    """One score per request, and metrics (`reward/mean`, `reward/errors`, `reward/timeouts`)."""

    scores: list[float]
    metrics: dict[str, float] = field(default_factory=dict)
