"""Model FLOPs of a GRPO step's phases, counted from the model's config and token counts.

A multiply-add is 2 FLOPs. Per token and layer a decoder's matmuls take: the q/k/v/o
projections 2·h·(2·q_dim + 2·kv_dim) and the gated MLP 2·3·h·i; attention adds 4·q_dim per key the token attends to (scores and the weighted
sum); the LM head 2·h·V per position that goes through it. Norms, RoPE, activations,
softmax and the optimizer are not counted (elementwise; the usual MFU convention, as
verl's `flops_counter.py`). A backward pass is twice its forward (so training is 3× the
forward, 4× with activation recomputation); the embedding lookup is no matmul.

Prompts of lengths `P_i`, `n` responses each of mean length `R` (token counts of a step):

- generation: prefill of each prompt (once per prompt when the engine shares it across the
  n samples, else n times) with the head at its last position only, then R − 1 decode
  steps per response, each one token attending to everything before it, with the head;
- training / log-prob passes: one causal forward per row over prompt + response (with
  shared prompts: the prompt once, each response attending to it), the head only on the R
  positions that predict response tokens.

Pure functions: `rl.bench.grpo_step` turns them into MFU against a matmul throughput it
measures in the same run; the trainer into `perf/tflops/actor` and `perf/mfu/actor`
(`rl.core.trainer.perf`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rl.core.plan.model_dims import ModelDims, dims_from_hf


def dims(config: dict[str, Any]) -> ModelDims:
    """ModelDims of a config.json."""
    return dims_from_hf(config)


def layer_flops_per_token(d: ModelDims) -> float:
    """Matmul FLOPs of one token through every decoder layer, attention scores excluded."""
    q_dim = d.num_attention_heads * d.head_dim
    projections = 2 * d.hidden_size * (2 * q_dim + 2 * d.kv_dim)
    mlp = 2 * 3 * d.hidden_size * d.intermediate_size
    return float(d.num_layers * (projections + mlp))


def attention_flops(d: ModelDims, keys_attended: float) -> float:
    """Scores and weighted sum over `keys_attended` (summed over the query tokens)."""
    return float(d.num_layers * 4 * d.num_attention_heads * d.head_dim * keys_attended)


def head_flops(d: ModelDims, positions: float) -> float:
    return float(2 * d.hidden_size * d.vocab_size * positions)


def causal_keys(start: float, count: float) -> float:
    """Keys attended by `count` tokens at positions start+1 … start+count (each sees itself
    and everything before): the sum of those positions."""
    return count * start + count * (count + 1) / 2


def forward_flops(d: ModelDims, tokens: float, keys: float, head_positions: float) -> float:
    """One forward: `tokens` through the layers, `keys` attended in all, the head on
    `head_positions`."""
    return (
        layer_flops_per_token(d) * tokens + attention_flops(d, keys) + head_flops(d, head_positions)
    )


def generation_flops(
    d: ModelDims, prompt_lengths: Sequence[int], n: int, response_mean: float, shared: bool
) -> float:
    """Prefill (shared across the n samples, or not) and R − 1 decode steps per response."""
    total = 0.0
    decode = max(response_mean - 1.0, 0.0)
    for p in prompt_lengths:
        prefill = forward_flops(d, p, causal_keys(0, p), 1)
        total += prefill * (1 if shared else n)
        # decode step k (1 … R−1) feeds one token at position p + k
        total += n * forward_flops(d, decode, decode * p + decode * (decode + 1) / 2, decode)
    return total


def sequence_forward_flops(
    d: ModelDims, prompt_lengths: Sequence[int], n: int, response_mean: float, shared: bool
) -> float:
    """A log-prob forward over every row: the head on the response positions only."""
    total = 0.0
    r = response_mean
    for p in prompt_lengths:
        if shared:
            prompt = forward_flops(d, p, causal_keys(0, p), 0)
            total += prompt + n * forward_flops(d, r, causal_keys(p, r), r)
        else:
            total += n * forward_flops(d, p + r, causal_keys(0, p + r), r)
    return total


def training_flops(
    d: ModelDims,
    prompt_lengths: Sequence[int],
    n: int,
    response_mean: float,
    shared: bool,
    recompute: bool = False,
) -> float:
    """Forward and backward (3 forwards; 4 with activation recomputation)."""
    return (4 if recompute else 3) * sequence_forward_flops(
        d, prompt_lengths, n, response_mean, shared
    )
