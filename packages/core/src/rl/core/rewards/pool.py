"""Worker processes that score chunks of responses; a dead or stuck worker restarts the pool.

Inside a worker each response has `timeout_s` (SIGALRM). A worker stuck where the alarm cannot
reach it (in C code) is caught by a chunk deadline here; a worker that dies (a crash, a
signal) is reported with its exit code. Either way the pool is killed and a new one started on
the next call, and the chunks it held fail with a text that says what happened.

Workers die with the trainer, even when it is killed with SIGKILL: each asks the kernel for a
parent-death signal (`rl.core.parent_death`). The kernel sends it when the thread that started
the worker ends, so every worker is started from one thread that lives as long as the pool.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from rl.core.rewards.types import ERROR, TIMEOUT, RewardRequest, ScoreOutcome
from rl.core.rewards.worker import init_worker, score_chunk


class ScoringPool:
    def __init__(
        self,
        num_workers: int,
        timeout_s: float,
        custom_path: str | None,
        custom_name: str,
        reward_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.num_workers, self.timeout_s = num_workers, timeout_s
        self.custom_path, self.custom_name = custom_path, custom_name
        self.reward_kwargs = dict(reward_kwargs or {})
        self.executor: ProcessPoolExecutor | None = None
        # Workers start on submit, in the submitting thread: always this one (see above).
        self.starter: ThreadPoolExecutor | None = None

    def _started(self) -> ProcessPoolExecutor:
        if self.executor is None:
            self.executor = ProcessPoolExecutor(
                max_workers=self.num_workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=init_worker,
                initargs=(self.custom_path, self.custom_name, self.reward_kwargs, os.getpid()),
            )
        return self.executor

    def _submitted(self, chunks: list[list[RewardRequest]]) -> list[Future[list[ScoreOutcome]]]:
        executor = self._started()
        return [executor.submit(score_chunk, chunk, self.timeout_s) for chunk in chunks]

    def score(self, requests: Sequence[RewardRequest]) -> list[ScoreOutcome]:
        requests = list(requests)
        size = max(1, -(-len(requests) // (self.num_workers * 4)))
        chunks = [requests[i : i + size] for i in range(0, len(requests), size)]
        if self.starter is None:
            self.starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reward-pool")
        futures = self.starter.submit(self._submitted, chunks).result()
        executor = self._started()
        workers = list(getattr(executor, "_processes", {}).values())  # to read a dead one's code
        deadline = self.timeout_s * (size + 1) + 30.0
        outcomes: list[ScoreOutcome] = []
        failure: ScoreOutcome | None = None  # set once the pool is broken
        for chunk, future in zip(chunks, futures, strict=True):
            if failure is not None and not future.done():  # behind a stuck worker: don't wait
                outcomes += [failure] * len(chunk)
                continue
            try:
                outcomes += future.result(timeout=deadline)
            except FutureTimeout:
                failure = ScoreOutcome(
                    0.0,
                    TIMEOUT,
                    {},
                    f"a reward worker did not answer within {deadline:g} s (stuck where "
                    "reward.timeout_s cannot interrupt it, e.g. in C code); the pool was restarted",
                )
                outcomes += [failure] * len(chunk)
            except BrokenProcessPool:
                failure = ScoreOutcome(0.0, ERROR, {}, death_text(workers))
                outcomes += [failure] * len(chunk)
        if failure is not None:
            self.kill()
        return outcomes

    def kill(self) -> None:
        if self.executor is None:
            return
        for process in list(getattr(self.executor, "_processes", {}).values()):
            process.kill()
        # waits for the pool's manager thread (quick: its workers are dead); one left running
        # races CPython 3.11's exit hook, which then writes to its closed wake-up pipe and
        # prints a traceback ("Bad file descriptor") as the run ends
        self.executor.shutdown(wait=True, cancel_futures=True)
        self.executor = None

    def close(self) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=True, cancel_futures=True)
            self.executor = None
        if self.starter is not None:
            self.starter.shutdown(wait=True)
            self.starter = None


def death_text(workers: list[Any]) -> str:
    """The text for a dead worker: "a reward worker process died (exit code N)".

    Once one worker dies the pool ends the others with SIGTERM, so an exit code other than
    that one names the worker that died on its own.
    """
    codes = [code for code in _exit_codes(workers) if code not in (None, 0)]
    own = [code for code in codes if code != -signal.SIGTERM] or codes
    if not own:
        return "a reward worker process died (exit code unknown)"
    code = own[0]
    try:
        cause = f": killed by {signal.Signals(-code).name}" if code < 0 else ""
    except ValueError:  # a signal number with no name
        cause = ""
    return f"a reward worker process died (exit code {code}{cause})"


def _exit_codes(workers: list[Any], wait_s: float = 2.0) -> list[int | None]:
    """The workers' exit codes, waiting a little: when the pool reports itself broken, its
    manager thread may still be reaping the dead worker (its code reads None until then)."""
    deadline = time.monotonic() + wait_s
    codes = [worker.exitcode for worker in workers]
    while None in codes and time.monotonic() < deadline:
        time.sleep(0.01)
        codes = [worker.exitcode for worker in workers]
    return codes
