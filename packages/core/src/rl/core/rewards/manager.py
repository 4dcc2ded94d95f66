"""`RewardManager`: scores a batch in a process pool; a crash or a hang never kills the run.

Requests are scored in chunks by worker processes. Inside a worker each sample
has `timeout_s` (SIGALRM); a worker stuck where the alarm cannot reach it (in
C code) is caught by a chunk deadline in the parent, which kills the pool and
starts a new one. Errors and timeouts score 0 and are counted in the metrics.
"""

from __future__ import annotations

import multiprocessing
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from rl.core.rewards.registry import default_compute_score, load_custom_reward
from rl.core.rewards.types import RewardRequest, RewardResult
from rl.core.rewards.worker import ERROR, OK, TIMEOUT, init_worker, score_chunk


class RewardManager:
    def __init__(
        self,
        custom_path: str | None = None,
        custom_name: str = "compute_score",
        num_workers: int = 0,
        timeout_s: float = 10.0,
        reward_scale: float | None = None,
    ) -> None:
        self.custom_path, self.custom_name = custom_path, custom_name
        self.num_workers, self.timeout_s, self.reward_scale = num_workers, timeout_s, reward_scale
        # Loaded here too, so a missing file or function fails at start-up, not mid-run.
        self.fn = (
            load_custom_reward(custom_path, custom_name) if custom_path else default_compute_score
        )
        self.pool: ProcessPoolExecutor | None = None

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            max_workers=self.num_workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=init_worker,
            initargs=(self.custom_path, self.custom_name),
        )

    def score(self, requests: Sequence[RewardRequest]) -> RewardResult:
        if self.num_workers <= 0:
            outcomes = score_chunk(requests, 0.0, self.fn)
        else:
            outcomes = self._score_in_pool(list(requests))
        return self._result(outcomes)

    def _score_in_pool(
        self, requests: list[RewardRequest]
    ) -> list[tuple[float, str, dict[str, float]]]:
        size = max(1, -(-len(requests) // (self.num_workers * 4)))
        chunks = [requests[i : i + size] for i in range(0, len(requests), size)]
        if self.pool is None:
            self.pool = self._new_pool()
        futures = [self.pool.submit(score_chunk, chunk, self.timeout_s) for chunk in chunks]
        deadline = self.timeout_s * (size + 1) + 30.0
        outcomes: list[tuple[float, str, dict[str, float]]] = []
        broken = False
        for chunk, future in zip(chunks, futures, strict=True):
            if broken and not future.done():  # behind a stuck worker: do not wait again
                outcomes += [(0.0, TIMEOUT, {}) for _ in chunk]
                continue
            try:
                outcomes += future.result(timeout=deadline)
            except FutureTimeout:
                broken = True
                outcomes += [(0.0, TIMEOUT, {}) for _ in chunk]
            except Exception:  # a worker died (e.g. the user's code crashed the process)
                broken = True
                outcomes += [(0.0, ERROR, {}) for _ in chunk]
        if broken:
            self._kill_pool()
        return outcomes

    def _kill_pool(self) -> None:
        if self.pool is None:
            return
        for process in list(getattr(self.pool, "_processes", {}).values()):
            process.kill()
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.pool = None

    def _result(self, outcomes: list[tuple[float, str, dict[str, float]]]) -> RewardResult:
        scores = [self._scaled(score, status) for score, status, _ in outcomes]
        extras: dict[str, list[float]] = defaultdict(list)
        for _, _, extra in outcomes:
            for key, value in extra.items():
                extras[key].append(value)
        count = max(len(scores), 1)
        metrics = {
            "reward/mean": sum(scores) / count,
            "reward/errors": float(sum(s == ERROR for _, s, _ in outcomes)),
            "reward/timeouts": float(sum(s == TIMEOUT for _, s, _ in outcomes)),
        }
        metrics.update({f"reward/{k}": sum(v) / len(v) for k, v in extras.items()})
        return RewardResult(scores, metrics)

    def _scaled(self, score: float, status: str) -> float:
        if self.reward_scale is None:
            return score
        return self.reward_scale if status == OK and score > 0 else -self.reward_scale

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None


def make_reward_manager(config: Any) -> RewardManager:
    """From the `reward` config section."""
    custom = config.custom_reward_function
    return RewardManager(
        custom.path, custom.name, config.num_workers, config.timeout_s, config.reward_scale
    )
