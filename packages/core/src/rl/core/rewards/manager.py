"""`RewardManager`: scores a batch, in-process or in a process pool, and never hides a failure.

A response whose reward function fails (raises, returns something that is not a finite number,
exits, times out, kills its worker) scores 0 (or -reward_scale) and its failure is counted in
`reward/errors`, `reward/timeouts` and `reward/error_rate`; each distinct failure text is
shown once, and the run stops with a `RewardError` when failures pass `reward.max_error_rate`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from rl.core.rewards.failures import FailureTracker
from rl.core.rewards.pool import ScoringPool
from rl.core.rewards.registry import default_compute_score, load_custom_reward
from rl.core.rewards.types import ERROR, OK, TIMEOUT, RewardRequest, RewardResult, ScoreOutcome
from rl.core.rewards.worker import score_chunk


class RewardManager:
    def __init__(
        self,
        custom_path: str | None = None,
        custom_name: str = "compute_score",
        reward_kwargs: dict[str, Any] | None = None,
        num_workers: int = 0,
        timeout_s: float = 10.0,
        reward_scale: float | None = None,
        max_error_rate: float = 0.5,
        error_rate_window: int = 5,
    ) -> None:
        self.num_workers, self.timeout_s, self.reward_scale = num_workers, timeout_s, reward_scale
        # Loaded here too, so a missing file or function fails at start-up, not mid-run.
        self.fn = (
            load_custom_reward(custom_path, custom_name, reward_kwargs)
            if custom_path
            else default_compute_score
        )
        self.failures = FailureTracker(max_error_rate, error_rate_window)
        self.pool = (
            ScoringPool(num_workers, timeout_s, custom_path, custom_name, reward_kwargs)
            if num_workers > 0
            else None
        )

    def score(self, requests: Sequence[RewardRequest]) -> RewardResult:
        """One score per request; raises RewardError when too many failed (see FailureTracker)."""
        requests = list(requests)
        if self.pool is None:
            outcomes = score_chunk(requests, self.timeout_s, self.fn)
        else:
            outcomes = self.pool.score(requests)
        error_rate = self.failures.record(requests, outcomes)
        return self._result(outcomes, error_rate)

    def _result(self, outcomes: list[ScoreOutcome], error_rate: float) -> RewardResult:
        scores = [self._scaled(outcome) for outcome in outcomes]
        extras: dict[str, list[float]] = defaultdict(list)
        for outcome in outcomes:
            for key, value in outcome.extras.items():
                extras[key].append(value)
        metrics = {
            "reward/mean": sum(scores) / max(len(scores), 1),
            "reward/errors": float(sum(o.status == ERROR for o in outcomes)),
            "reward/timeouts": float(sum(o.status == TIMEOUT for o in outcomes)),
            "reward/error_rate": error_rate,
        }
        metrics.update({f"reward/{k}": sum(v) / len(v) for k, v in extras.items()})
        return RewardResult(
            scores,
            metrics,
            [outcome.error for outcome in outcomes],
            [dict(outcome.extras) for outcome in outcomes],
        )

    def _scaled(self, outcome: ScoreOutcome) -> float:
        if self.reward_scale is None:
            return outcome.score
        good = outcome.status == OK and outcome.score > 0
        return self.reward_scale if good else -self.reward_scale

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()


def make_reward_manager(config: Any, served: dict[str, Any] | None = None) -> RewardManager:
    """From the `reward` config section; `served`: what a served reward model adds to each
    call of the custom function (`rl.core.workers.reward_model_server`)."""
    custom = config.custom_reward_function
    return RewardManager(
        custom.path,
        custom.name,
        {**custom.reward_kwargs, **(served or {})},
        num_workers=config.num_workers,
        timeout_s=config.timeout_s,
        reward_scale=config.reward_scale,
        max_error_rate=config.max_error_rate,
        error_rate_window=config.error_rate_window,
    )
