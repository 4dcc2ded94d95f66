"""An `async def` reward function, as verl's reward loop runs one: awaited, the samples of a
scoring call at the same time (a generative reward model's function spends its time waiting
for the served model, which batches the requests that wait together)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from rl.core.rewards.types import RewardRequest


class AsyncScore:
    """`fn` with the options every call passes (reward_kwargs, a served reward model's
    address and tokenizer). Called like a plain function it runs one call to the end;
    `rl.core.rewards.worker.score_chunk` runs a chunk's calls at once instead."""

    def __init__(
        self, fn: Callable[..., Coroutine[Any, Any, Any]], options: Mapping[str, Any]
    ) -> None:
        self.fn, self.options = fn, dict(options)

    def __call__(self, **kwargs: Any) -> Any:
        return asyncio.run(self.fn(**kwargs, **self.options))

    def call(self, request: RewardRequest) -> Coroutine[Any, Any, Any]:
        return self.fn(
            data_source=request.data_source,
            solution_str=request.solution_str,
            ground_truth=request.ground_truth,
            extra_info=request.extra_info,
            **self.options,
        )
