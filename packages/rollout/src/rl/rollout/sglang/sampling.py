"""`rl.core.engines.SamplingParams` -> SGLang's per-request `sampling_params` dicts.

The engine sends one request per response row (prompt i's n rows are i*n .. i*n+n-1) with
SGLang's `n` left at 1, so the grouping never depends on how SGLang orders parallel samples.

- temperature 0 is greedy: sent as temperature 0, top_p 1, top_k 1 (SGLang's own spelling
  of greedy; it then samples argmax and reports log_softmax(logits)).
- top_k: ours uses -1 and 0 for "off"; SGLang accepts only -1 for that (0 fails its
  validation), so both become -1.
- stop_token_ids: the tokenizer's EOS is added. SGLang also stops at the EOS of the model's
  generation config, but with `skip_tokenizer_init` it never sees the tokenizer's; the stop
  token is kept in the output.
- seed: SGLang's per-request `sampling_seed` (row r of a call gets seed + r, so the n
  samples of a prompt differ and the same seed repeats the call). SGLang honours it only
  with `enable_deterministic_inference` (and the "pytorch" sampling backend when top-p/top-k
  are on), set through `engine_kwargs.sglang`; releases without `sampling_seed` refuse a seed.
- min_new_tokens > 0 is refused: SGLang's min-new-tokens penalizer reads the EOS id from
  its tokenizer, which token-in/token-out mode (`skip_tokenizer_init`) does not load.
- repetition_penalty != 1 is refused: SGLang releases in the supported range accept the key
  but several apply no repetition penalizer (sgl-project/sglang#28179), so it would be
  silently ignored.
"""

from __future__ import annotations

from typing import Any

from rl.core.engines import SamplingParams
from rl.core.errors import UserError

SEED_MASK = (1 << 63) - 1


class UnsupportedSamplingError(UserError, ValueError):
    """A sampling setting the SGLang engine cannot honour as the contract asks."""


def check_supported(sampling: SamplingParams, seed_supported: bool) -> None:
    """Raise `UnsupportedSamplingError` for settings SGLang would ignore or crash on."""
    if sampling.min_new_tokens > 0:
        raise UnsupportedSamplingError(
            f"min_new_tokens = {sampling.min_new_tokens}: SGLang cannot hold back EOS in "
            "token-in/token-out mode (skip_tokenizer_init); use min_new_tokens = 0 or the hf engine"
        )
    if sampling.repetition_penalty != 1.0:
        raise UnsupportedSamplingError(
            f"repetition_penalty = {sampling.repetition_penalty}: SGLang accepts it but does not "
            "apply it in every supported release; use 1.0 or the hf/vllm engine"
        )
    if sampling.seed is not None and not seed_supported:
        raise UnsupportedSamplingError(
            f"seed = {sampling.seed}: this SGLang has no per-request sampling_seed; "
            "drop the seed or upgrade SGLang"
        )
    if sampling.prompt_seeds and not seed_supported:
        raise UnsupportedSamplingError(
            "this SGLang has no per-request sampling_seed, which the trainer's per-sample "
            "seeds (placement-independent sampling) need: upgrade SGLang or use the hf/vllm engine"
        )


def request_params(sampling: SamplingParams, eos_token_id: int | None) -> dict[str, Any]:
    """The SGLang `sampling_params` dict of one response row (no seed; see `row_params`)."""
    greedy = sampling.temperature == 0
    stop_ids = set(sampling.stop_token_ids)
    if eos_token_id is not None:
        stop_ids.add(eos_token_id)
    return {
        "n": 1,
        "temperature": 0.0 if greedy else sampling.temperature,
        "top_p": 1.0 if greedy else sampling.top_p,
        "top_k": 1 if greedy else (sampling.top_k if sampling.top_k > 0 else -1),
        "max_new_tokens": sampling.max_new_tokens,
        "stop_token_ids": sorted(stop_ids),
        "ignore_eos": sampling.ignore_eos,
    }


def row_params(
    sampling: SamplingParams,
    num_prompts: int,
    eos_token_id: int | None,
    seed_supported: bool = True,
) -> list[dict[str, Any]]:
    """One `sampling_params` dict per row, num_prompts * sampling.n rows, grouped by prompt."""
    check_supported(sampling, seed_supported)
    base = request_params(sampling, eos_token_id)
    rows = num_prompts * sampling.n
    seeds = sampling.sample_seeds(num_prompts)
    if seeds is not None:  # each sample row its own seed, whatever its neighbours
        return [base | {"sampling_seed": seed & SEED_MASK} for seed in seeds]
    if sampling.seed is None:
        return [dict(base) for _ in range(rows)]
    return [base | {"sampling_seed": (sampling.seed + row) & SEED_MASK} for row in range(rows)]


def expand_prompts(prompt_ids: list[list[int]], n: int) -> list[list[int]]:
    """Each prompt repeated n times in place: rows i*n .. i*n+n-1 are prompt i."""
    return [list(prompt) for prompt in prompt_ids for _ in range(n)]
