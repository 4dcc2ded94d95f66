"""The benchmark's FLOP counter: `rl.core.plan.flops` (the trainer's `perf/*` metrics use it
too)."""

from rl.core.plan.flops import (
    attention_flops,
    causal_keys,
    dims,
    forward_flops,
    generation_flops,
    head_flops,
    layer_flops_per_token,
    sequence_forward_flops,
    training_flops,
)

__all__ = [
    "attention_flops",
    "causal_keys",
    "dims",
    "forward_flops",
    "generation_flops",
    "head_flops",
    "layer_flops_per_token",
    "sequence_forward_flops",
    "training_flops",
]
