"""Our `SamplingParams` -> vLLM's `SamplingParams`.

vLLM reads top_k -1 as "off" (0 too, in recent releases; we always send -1). Without a
tokenizer in the engine (token in / token out) vLLM does not know the EOS id, so EOS
goes into `stop_token_ids`; the stop token is kept in the output, as the HF engine
does. `ignore_eos` generates `max_new_tokens` whatever is sampled (no stop token at
all, as in the HF engine).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rl.core.engines import SamplingParams


def one_prompt(sampling: SamplingParams, index: int) -> SamplingParams:
    """The request of prompt `index`: its per-prompt seed as the request's seed."""
    if not sampling.prompt_seeds:
        return sampling
    return replace(sampling, seed=sampling.prompt_seeds[index], prompt_seeds=())


def vllm_sampling_kwargs(
    sampling: SamplingParams, eos_token_id: int | None, detokenize: bool = False
) -> dict[str, Any]:
    """Keyword arguments of `vllm.SamplingParams` for one request of `sampling.n` samples."""
    stop_ids: list[int] = []
    if not sampling.ignore_eos:
        stop_ids = [t for t in (eos_token_id, *sampling.stop_token_ids) if t is not None]
    greedy = sampling.temperature == 0
    return {
        "n": sampling.n,
        "temperature": sampling.temperature,
        "top_p": 1.0 if greedy else sampling.top_p,
        "top_k": -1 if greedy or sampling.top_k <= 0 else sampling.top_k,
        "max_tokens": sampling.max_new_tokens,
        "min_tokens": sampling.min_new_tokens,
        "stop_token_ids": list(dict.fromkeys(stop_ids)),
        "ignore_eos": sampling.ignore_eos,
        "repetition_penalty": sampling.repetition_penalty,
        "seed": sampling.seed,
        "logprobs": 0,  # the sampled token's log-prob only
        "detokenize": detokenize,
    }


def to_vllm(
    vllm: Any, sampling: SamplingParams, eos_token_id: int | None, detokenize: bool = False
) -> Any:
    """A `vllm.SamplingParams` that returns every sample at once (FINAL_ONLY)."""
    from vllm.sampling_params import RequestOutputKind

    kwargs = vllm_sampling_kwargs(sampling, eos_token_id, detokenize)
    return vllm.SamplingParams(**kwargs, output_kind=RequestOutputKind.FINAL_ONLY)
