"""Scoring inside a worker process: per-sample timeout by SIGALRM, errors become 0."""

from __future__ import annotations

import math
import signal
from collections.abc import Sequence
from typing import Any

from rl.core.rewards.registry import ScoreFn, default_compute_score, load_custom_reward
from rl.core.rewards.types import RewardRequest

OK, ERROR, TIMEOUT = "ok", "error", "timeout"
_SCORE_FN: ScoreFn = default_compute_score


class _SampleTimeout(Exception):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise _SampleTimeout


def init_worker(custom_path: str | None, custom_name: str) -> None:
    """Pool initializer: load the user's function inside the worker process."""
    global _SCORE_FN
    _SCORE_FN = (
        load_custom_reward(custom_path, custom_name) if custom_path else default_compute_score
    )


def score_one(fn: ScoreFn, request: RewardRequest) -> tuple[float, dict[str, float]]:
    """(score, extra metrics) of one request; a dict result carries its own metrics."""
    result = fn(request.data_source, request.solution_str, request.ground_truth, request.extra_info)
    if isinstance(result, dict):
        extras = {
            k: float(v) for k, v in result.items() if k != "score" and isinstance(v, (int, float))
        }
        return float(result["score"]), extras
    score = float(result)
    if not math.isfinite(score):
        raise ValueError(f"reward is not finite: {score}")
    return score, {}


def score_chunk(
    requests: Sequence[RewardRequest], timeout_s: float, fn: ScoreFn | None = None
) -> list[tuple[float, str, dict[str, float]]]:
    """Score requests one by one; each gets `timeout_s` (enforced with SIGALRM when > 0)."""
    fn = fn or _SCORE_FN
    use_alarm = timeout_s > 0 and hasattr(signal, "setitimer")
    previous = signal.signal(signal.SIGALRM, _on_alarm) if use_alarm else None
    out: list[tuple[float, str, dict[str, float]]] = []
    try:
        for request in requests:
            try:
                if use_alarm:
                    signal.setitimer(signal.ITIMER_REAL, timeout_s)
                score, extras = score_one(fn, request)
                out.append((score, OK, extras))
            except _SampleTimeout:
                out.append((0.0, TIMEOUT, {}))
            except Exception:
                out.append((0.0, ERROR, {}))
            finally:
                if use_alarm:
                    signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        if use_alarm:
            signal.signal(signal.SIGALRM, previous)
    return out
