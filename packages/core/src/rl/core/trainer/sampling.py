"""How responses are sampled: for training (`rollout.*`) and for validation
(`rollout.val_kwargs.*`, greedy by default), from one recipe."""

from __future__ import annotations

from typing import Any

from rl.core.engines import SamplingParams


def sampling(config: Any, draw: Any, **extra: Any) -> SamplingParams:
    """Responses drawn as `draw` says (its n, temperature, top_p, top_k), up to
    `data.max_response_length` tokens, stopped and penalised as `rollout` says."""
    rollout = config.rollout
    return SamplingParams(
        n=draw.n,
        temperature=draw.temperature,
        top_p=draw.top_p,
        top_k=draw.top_k,
        max_new_tokens=config.data.max_response_length,
        stop_token_ids=rollout.stop_token_ids,
        repetition_penalty=rollout.repetition_penalty,
        **extra,
    )


def train_sampling(config: Any) -> SamplingParams:
    rollout = config.rollout
    return sampling(
        config, rollout, min_new_tokens=rollout.min_new_tokens, ignore_eos=rollout.ignore_eos
    )


def val_sampling(config: Any) -> SamplingParams:
    return sampling(config, config.rollout.val_kwargs)
