"""A transformers causal LM whose per-token numbers do not depend on the batch around them
(`rollout.batch_invariant`, true on-policy RL).

`make_batch_invariant` changes how the model computes, not what: every `nn.Linear` gets at
least `MIN_ROWS` rows (zeros added), the SiLU activations become the place-independent
formula, and attention becomes `rl_invariant` (`rl.kernels.invariant`, which says why each
is needed). Parameters, names and ties are untouched. The rollout engine and the trainer
apply it to their models and take log-probs with the trainer's function (the fused
kernel, or `rl.core.models.token_logprobs` on logits): a sampled token's log-prob then
comes out bit for bit the same on both sides.
"""

from __future__ import annotations

import functools

import torch

from rl.kernels.invariant import invariant_silu, over_min_rows, register, verify_rows


class InvariantSiLU(torch.nn.Module):
    """The SiLU activation, computed the same way at every place of a tensor."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return invariant_silu(x)


def _is_silu(module: torch.nn.Module) -> bool:
    return isinstance(module, torch.nn.SiLU) or type(module).__name__ == "SiLUActivation"


def make_batch_invariant(model: torch.nn.Module) -> None:
    """Make `model` (a transformers text causal LM) batch-invariant; idempotent. Raises if
    this machine's GEMM is not row-invariant."""
    if getattr(model, "_rl_batch_invariant", False):
        return
    if getattr(model.config, "vision_config", None) is not None:
        raise ValueError("rollout.batch_invariant runs text models only (no vision tower yet)")
    for module in list(model.modules()):
        for child_name, child in list(module.named_children()):
            if _is_silu(child):
                setattr(module, child_name, InvariantSiLU())
        if type(module) is torch.nn.Linear:
            verify_rows(module.in_features, min(module.out_features, 4096), module.weight.dtype)
            module.forward = functools.partial(over_min_rows, module.forward)  # type: ignore[method-assign]
    model.set_attn_implementation(register())  # type: ignore[operator]
    model._rl_batch_invariant = True  # type: ignore[assignment]
