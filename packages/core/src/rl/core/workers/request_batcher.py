"""Concurrent single requests (an agent loop's `generate_one` calls) gathered into batched
`generate` calls: the rollout role keeps one per replica, the Hugging Face engine one of
its own. One batch runs at a time (per replica); whatever arrives meanwhile goes into the
next one, so a batch is every trajectory waiting for the model at that
moment. Requests batch together when their sampling parameters match except for
`max_new_tokens`: the batch generates to the largest budget and each row is cut back to
its own. A request with a seed runs alone (its samples must not depend on its neighbours);
requests with per-prompt seeds (`prompt_seeds`) batch, each keeping its own seeds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import astuple, dataclass, replace
from typing import Any

from rl.core.algorithms.groups import group_rows
from rl.core.engines import Rollouts, SamplingParams

# the batched call, as an awaitable: a thread running `engine.generate`, a worker's reply
Generate = Callable[[list[list[int]], SamplingParams], Awaitable[Rollouts]]


@dataclass
class _Request:
    prompt: list[int]
    sampling: SamplingParams
    future: asyncio.Future[Rollouts]


class RequestBatcher:
    def __init__(self, generate: Generate, max_batch_size: int = 256) -> None:
        self.generate, self.max_batch_size = generate, max_batch_size
        self._pending: list[_Request] = []
        self._drainer: asyncio.Task[None] | None = None

    async def submit(self, prompt_ids: Sequence[int], sampling: SamplingParams) -> Rollouts:
        loop = asyncio.get_running_loop()
        request = _Request(list(prompt_ids), sampling, loop.create_future())
        self._pending.append(request)
        if self._drainer is None or self._drainer.done():
            # Created after the requests already scheduled in this loop iteration, so the
            # first batch holds all of them.
            self._drainer = loop.create_task(self._drain())
        return await request.future

    async def _drain(self) -> None:
        try:
            while self._pending:
                waiting, self._pending = self._pending, []
                for group in _groups(waiting, self.max_batch_size):
                    await self._run(group)
        finally:  # cancelled with its event loop: nothing may be left for another loop
            for request in self._pending:
                request.future.cancel()
            self._pending = []

    async def _run(self, group: list[_Request]) -> None:
        budget = max(request.sampling.max_new_tokens for request in group)
        seeds = tuple(seed for request in group for seed in request.sampling.prompt_seeds)
        sampling = replace(group[0].sampling, max_new_tokens=budget, prompt_seeds=seeds)
        try:
            out = await self.generate([r.prompt for r in group], sampling)
        except Exception as error:
            for request in group:
                if not request.future.done():
                    request.future.set_exception(error)
            return
        n = sampling.n
        for index, request in enumerate(group):
            if not request.future.done():  # not abandoned (cancelled) meanwhile
                rows = group_rows(index, n)
                request.future.set_result(_cut(out, rows, request.sampling.max_new_tokens))


def _key(sampling: SamplingParams) -> tuple[Any, ...]:
    seeded = bool(sampling.prompt_seeds)  # a batch is seeded per prompt throughout or not at all
    sampling = replace(sampling, prompt_seeds=())
    if sampling.ignore_eos or sampling.min_new_tokens:  # the budget shapes the samples
        return (seeded, *astuple(sampling))
    return (seeded, *astuple(replace(sampling, max_new_tokens=1)))


def _groups(requests: list[_Request], size: int) -> list[list[_Request]]:
    groups: dict[tuple[Any, ...], list[list[_Request]]] = {}
    for number, request in enumerate(requests):
        key = _key(request.sampling) if request.sampling.seed is None else ("alone", number)
        chunks = groups.setdefault(key, [[]])
        if len(chunks[-1]) * request.sampling.n >= size:
            chunks.append([])
        chunks[-1].append(request)
    return [chunk for chunks in groups.values() for chunk in chunks]


def _cut(out: Rollouts, rows: range, budget: int) -> Rollouts:
    """Rows `rows` of `out`, each at most `budget` tokens (then finished by length)."""
    result = Rollouts([], [], [], [])
    for row in rows:
        ids, logprobs = out.response_ids[row], out.logprobs[row]
        reason = out.finish_reasons[row] if out.finish_reasons else "stop"
        if len(ids) > budget:
            ids, logprobs, reason = ids[:budget], logprobs[:budget], "length"
        result.prompt_ids.append(out.prompt_ids[row])
        result.response_ids.append(list(ids))
        result.logprobs.append(list(logprobs))
        result.finish_reasons.append(reason)
        if out.weight_versions:
            result.weight_versions.append(out.weight_versions[row])
        if out.routed_experts:  # prompt + kept response tokens
            result.routed_experts.append(
                out.routed_experts[row][: len(out.prompt_ids[row]) + len(ids)]
            )
    return result
