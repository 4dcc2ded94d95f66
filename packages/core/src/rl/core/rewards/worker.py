"""Scoring one chunk of responses, in a pool worker or in the trainer's own process.

Every way the user's function can fail becomes a `ScoreOutcome` with status ERROR or TIMEOUT,
score 0 and a one-line text saying what happened: an exception (with its file and line), a
result that is not a finite number, a call of sys.exit or os._exit, or a timeout.
"""

from __future__ import annotations

import asyncio
import os
import signal
import traceback
from collections.abc import Sequence
from typing import Any

from rl.core.parent_death import die_with_parent
from rl.core.rewards.async_score import AsyncScore
from rl.core.rewards.guards import (
    ExitCalled,
    SampleTimeout,
    alarm,
    alarm_handler,
    alarm_possible,
    exits_trapped,
)
from rl.core.rewards.registry import ScoreFn, default_compute_score, load_custom_reward
from rl.core.rewards.types import ERROR, OK, TIMEOUT, RewardRequest, ScoreOutcome
from rl.core.rewards.values import BadRewardValue, read_reward

__all__ = ["ERROR", "OK", "TIMEOUT", "init_worker", "score_chunk", "score_one"]

_SCORE_FN: ScoreFn = default_compute_score
_MAX_TEXT = 300


def init_worker(
    custom_path: str | None,
    custom_name: str,
    reward_kwargs: dict[str, Any] | None = None,
    parent_pid: int | None = None,
) -> None:
    """Pool initializer: die with `parent_pid` (the trainer), leave Ctrl-C to it (a terminal
    sends SIGINT to every process of the run: the trainer stops gracefully and still needs
    its workers for the step it finishes; a worker still starting up is not covered), then
    load the user's function inside the worker process."""
    global _SCORE_FN
    if parent_pid is not None:
        die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _SCORE_FN = (
        load_custom_reward(custom_path, custom_name, reward_kwargs)
        if custom_path
        else default_compute_score
    )


def score_chunk(
    requests: Sequence[RewardRequest], timeout_s: float, fn: ScoreFn | None = None
) -> list[ScoreOutcome]:
    """Score requests one by one, each within `timeout_s` (0: no limit).

    The limit is a SIGALRM, so it holds only on the main thread (always so in a pool worker);
    elsewhere responses are scored without one. An alarm cannot interrupt C code that does not
    return to Python: with `reward.num_workers > 0` the pool's chunk deadline covers that.
    """
    fn = fn or _SCORE_FN
    if isinstance(fn, AsyncScore):
        return asyncio.run(_score_concurrently(fn, requests, timeout_s))
    timed = timeout_s > 0 and alarm_possible()
    with alarm_handler(timed), exits_trapped():
        return [score_one(fn, request, timeout_s if timed else 0.0) for request in requests]


def score_one(fn: ScoreFn, request: RewardRequest, timeout_s: float = 0.0) -> ScoreOutcome:
    """One response's outcome; call inside `alarm_handler` when `timeout_s` > 0."""
    try:
        with alarm(timeout_s):
            result = fn(
                data_source=request.data_source,
                solution_str=request.solution_str,
                ground_truth=request.ground_truth,
                extra_info=request.extra_info,
            )
        score, extras = read_reward(result)
    except (SampleTimeout, ExitCalled, SystemExit, Exception) as error:
        return failed(error, timeout_s)
    return ScoreOutcome(score, OK, extras)


def failed(error: BaseException, timeout_s: float) -> ScoreOutcome:
    """What a call of the user's function that raised `error` scores, and the text why."""
    if isinstance(error, (SampleTimeout, TimeoutError)):
        return ScoreOutcome(0.0, TIMEOUT, {}, f"timed out after {timeout_s:g} s (reward.timeout_s)")
    if isinstance(error, ExitCalled):
        return ScoreOutcome(0.0, ERROR, {}, f"called os._exit({error.code!r})")
    if isinstance(error, SystemExit):
        code = "" if error.code is None else repr(error.code)
        return ScoreOutcome(0.0, ERROR, {}, f"called sys.exit({code})")
    if isinstance(error, BadRewardValue):
        return ScoreOutcome(0.0, ERROR, {}, str(error))
    return ScoreOutcome(0.0, ERROR, {}, describe_exception(error))


async def _score_concurrently(
    fn: AsyncScore, requests: Sequence[RewardRequest], timeout_s: float
) -> list[ScoreOutcome]:
    """An async function's outcomes, its calls awaited together, each within `timeout_s`
    (an await that never returns to the event loop is not stopped here: a pool's chunk
    deadline stops it, `reward.num_workers` > 0)."""
    with exits_trapped():
        return list(await asyncio.gather(*[_awaited(fn, r, timeout_s) for r in requests]))


async def _awaited(fn: AsyncScore, request: RewardRequest, timeout_s: float) -> ScoreOutcome:
    try:
        call = fn.call(request)
        result = await (asyncio.wait_for(call, timeout_s) if timeout_s > 0 else call)
        score, extras = read_reward(result)
    except (ExitCalled, SystemExit, Exception) as error:
        return failed(error, timeout_s)
    return ScoreOutcome(score, OK, extras)


def describe_exception(error: BaseException) -> str:
    """`Type: message (file.py, line N)`, the place being the innermost frame of the traceback."""
    text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    frames = traceback.extract_tb(error.__traceback__)
    if frames and frames[-1].filename != __file__:
        text += f" ({os.path.basename(frames[-1].filename)}, line {frames[-1].lineno})"
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 3] + "..."
