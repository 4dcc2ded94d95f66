"""`RequestBatcher`: single requests in flight at the same time become one batched call;
each answer is its own rows, cut to its own budget; requests that arrive while a batch runs
form the next; seeded requests run alone; a failing batch fails its requests only."""

from __future__ import annotations

import asyncio

import pytest

from rl.core.engines import Rollouts, SamplingParams
from rl.core.workers.request_batcher import RequestBatcher


class Counting:
    """A batched `generate`: response = the prompt's first id repeated, up to the budget,
    then (for even ids) an EOS of 0. Records each call's prompts and budget."""

    def __init__(self):
        self.calls = []
        self.seeds = []

    async def __call__(self, prompts, sampling):
        self.calls.append(([p[0] for p in prompts], sampling.max_new_tokens))
        self.seeds.append(sampling.sample_seeds(len(prompts)))
        await asyncio.sleep(0.01)
        out = Rollouts([], [], [], [])
        for prompt in prompts:
            for _ in range(sampling.n):
                ids = [prompt[0]] * 6 + ([0] if prompt[0] % 2 == 0 else [])
                ids = ids[: sampling.max_new_tokens]
                stopped = ids[-1] == 0
                out.prompt_ids.append(list(prompt))
                out.response_ids.append(ids)
                out.logprobs.append([-float(prompt[0])] * len(ids))
                out.finish_reasons.append("stop" if stopped else "length")
        return out


def gather(batcher, requests):
    async def main():
        return await asyncio.gather(*(batcher.submit(p, s) for p, s in requests))

    return asyncio.run(main())


def test_requests_in_flight_together_are_one_call_and_get_their_own_rows():
    generate = Counting()
    batcher = RequestBatcher(generate)
    requests = [
        ([i], SamplingParams(max_new_tokens=budget))
        for i, budget in [(1, 3), (2, 10), (3, 10), (4, 4)]
    ]
    answers = gather(batcher, requests)
    assert generate.calls == [([1, 2, 3, 4], 10)]  # one call, to the largest budget
    assert [a.response_ids[0] for a in answers] == [[1] * 3, [2] * 6 + [0], [3] * 6, [4] * 4]
    assert [a.finish_reasons[0] for a in answers] == ["length", "stop", "length", "length"]
    assert [a.logprobs[0][0] for a in answers] == [-1.0, -2.0, -3.0, -4.0]
    assert [a.prompt_ids[0] for a in answers] == [[1], [2], [3], [4]]


def test_different_sampling_splits_batches_and_seeded_requests_run_alone():
    generate = Counting()
    batcher = RequestBatcher(generate)
    hot, cold = SamplingParams(temperature=1.0), SamplingParams(temperature=0.0)
    seeded = SamplingParams(seed=7)
    gather(batcher, [([1], hot), ([2], cold), ([3], hot), ([4], seeded), ([5], seeded)])
    assert sorted(prompts for prompts, _ in generate.calls) == [[1, 3], [2], [4], [5]]


def test_requests_with_per_prompt_seeds_batch_and_keep_their_seeds():
    generate = Counting()
    batcher = RequestBatcher(generate)
    requests = [([i], SamplingParams(n=2, prompt_seeds=(100 * i,))) for i in (1, 2, 3)]
    unseeded = ([4], SamplingParams(n=2))
    gather(batcher, [*requests, unseeded])
    assert sorted(prompts for prompts, _ in generate.calls) == [[1, 2, 3], [4]]
    batched = generate.calls.index(([1, 2, 3], 256))
    assert generate.seeds[batched] == [100, 101, 200, 201, 300, 301]


def test_n_rows_per_request_and_the_batch_size_limit():
    generate = Counting()
    batcher = RequestBatcher(generate, max_batch_size=4)
    answers = gather(batcher, [([i], SamplingParams(n=2, max_new_tokens=2)) for i in range(1, 6)])
    assert [prompts for prompts, _ in generate.calls] == [[1, 2], [3, 4], [5]]
    assert [a.response_ids for a in answers][2] == [[3, 3], [3, 3]]


def test_requests_arriving_during_a_batch_form_the_next():
    generate = Counting()
    batcher = RequestBatcher(generate)

    async def main():
        first = asyncio.gather(
            batcher.submit([1], SamplingParams()), batcher.submit([2], SamplingParams())
        )
        await asyncio.sleep(0.002)  # the first batch is running
        later = asyncio.gather(
            batcher.submit([3], SamplingParams()), batcher.submit([4], SamplingParams())
        )
        return await first, await later

    asyncio.run(main())
    assert [prompts for prompts, _ in generate.calls] == [[1, 2], [3, 4]]


def test_a_failing_batch_fails_its_requests_and_the_batcher_goes_on():
    calls = []

    async def flaky(prompts, sampling):
        calls.append(prompts)
        if len(calls) == 1:
            raise RuntimeError("engine fell over")
        return await Counting()(prompts, sampling)

    batcher = RequestBatcher(flaky)
    with pytest.raises(RuntimeError, match="engine fell over"):
        gather(batcher, [([1], SamplingParams()), ([2], SamplingParams())])
    answers = gather(batcher, [([3], SamplingParams(max_new_tokens=2))])  # a new event loop
    assert answers[0].response_ids == [[3, 3]]
