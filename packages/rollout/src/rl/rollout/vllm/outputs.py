"""vLLM `RequestOutput`s -> our `Rollouts` (rows grouped per prompt, n per group)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rl.core.engines import Rollouts

FINISH_REASONS = {"stop": "stop", "length": "length"}


def sampled_logprobs(completion: Any) -> list[float]:
    """The log-prob of each sampled token (vLLM returns {token: Logprob} per position)."""
    if completion.logprobs is None:
        raise RuntimeError("vLLM returned no log-probs; the request must ask for logprobs=0")
    return [
        float(position[token].logprob)
        for position, token in zip(completion.logprobs, completion.token_ids, strict=True)
    ]


def to_rollouts(prompts: Sequence[Sequence[int]], outputs: Sequence[Any], n: int) -> Rollouts:
    """`outputs[i]` is prompt i's final output holding its n samples."""
    rollouts = Rollouts([], [], [], [])
    for prompt, output in zip(prompts, outputs, strict=True):
        samples = sorted(output.outputs, key=lambda completion: completion.index)
        if len(samples) != n:
            raise RuntimeError(f"vLLM returned {len(samples)} samples for a prompt, asked {n}")
        for completion in samples:
            reason = FINISH_REASONS.get(str(completion.finish_reason))
            if reason is None:
                raise RuntimeError(
                    f"vLLM ended a request with finish_reason={completion.finish_reason!r}"
                )
            rollouts.prompt_ids.append(list(prompt))
            rollouts.response_ids.append(list(completion.token_ids))
            rollouts.logprobs.append(sampled_logprobs(completion))
            rollouts.finish_reasons.append(reason)
    return rollouts
