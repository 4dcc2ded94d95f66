"""A SwiGLU MLP that leaves half its activations to backward.

`down_proj(silu(gate_proj(x)) * up_proj(x))` (Qwen2, Llama, Qwen3, Mistral) leaves four
[tokens, intermediate] tensors to autograd: the gate and up projections, silu(gate), and
the product `down_proj` reads. `GatedDown` runs `silu(gate) * up` and `down_proj` as one
autograd function that saves the gate and up projections alone and computes silu(gate)
and the product again in its backward: elementwise work, small beside the layer's
matmuls. At the Qwen2.5-0.5B shape (intermediate 4864) and 1,808 packed tokens that is
2 x 35 MB a layer less at the update's peak. The forward's numbers are the same ops in
the same order (`F.silu`, `*`, `F.linear`), and the backward uses autograd's own silu
derivative (`aten.silu_backward`).

Installed on the trained roles' models with the fused kernels (`actor.use_fused_kernels`,
`rl.core.config.schema.fused_log_probs`), on MLPs whose three projections are plain
`nn.Linear` layers and whose activation is the config's `hidden_act: silu`; LoRA-wrapped
projections and MoE experts keep their own forward.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.nn.functional as F

from rl.kernels.invariant import invariant_silu, over_min_rows


class GatedDown(torch.autograd.Function):
    """down(silu(gate) * up), saving `gate` and `up` (not silu(gate) or the product)."""

    @staticmethod
    def forward(
        ctx: Any,
        gate: torch.Tensor,
        up: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        invariant: bool = False,
    ) -> torch.Tensor:
        ctx.save_for_backward(gate, up, weight)
        ctx.has_bias, ctx.invariant = bias is not None, invariant
        if not invariant:
            return F.linear(F.silu(gate) * up, weight, bias)
        # rollout.batch_invariant: the place-independent SiLU, at least MIN_ROWS rows
        return over_min_rows(lambda rows: F.linear(rows, weight, bias), invariant_silu(gate) * up)

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        gate, up, weight = ctx.saved_tensors
        activation = invariant_silu(gate) if ctx.invariant else F.silu(gate)
        grad_product = grad_out @ weight  # [..., intermediate]
        rows = grad_out.reshape(-1, grad_out.shape[-1])
        grad_weight = grad_bias = None
        if ctx.needs_input_grad[2]:
            grad_weight = rows.t() @ (activation * up).reshape(-1, up.shape[-1])
        if ctx.has_bias and ctx.needs_input_grad[3]:
            grad_bias = rows.sum(0)
        grad_up = grad_product * activation
        grad_gate = torch.ops.aten.silu_backward(grad_product * up, gate)
        return grad_gate, grad_up, grad_weight, grad_bias, None


def gated_mlp_forward(
    module: torch.nn.Module, x: torch.Tensor, invariant: bool = False
) -> torch.Tensor:
    down = module.down_proj
    gate, up = module.gate_proj(x), module.up_proj(x)
    return GatedDown.apply(gate, up, down.weight, down.bias, invariant)


def use_gated_mlps(model: torch.nn.Module, invariant: bool = False) -> int:
    """Route every SwiGLU MLP of `model` through `GatedDown` (parameters and names
    untouched: only the instances' `forward`); returns how many. `invariant`: its forward
    is batch-invariant (`rl.kernels.invariant`), for a model `make_batch_invariant` made so."""
    config = getattr(model, "config", None)
    if getattr(config, "hidden_act", None) != "silu":
        return 0
    count = 0
    for module in model.modules():
        projections = [
            getattr(module, name, None) for name in ("gate_proj", "up_proj", "down_proj")
        ]
        if all(type(p) is torch.nn.Linear for p in projections) and hasattr(module, "act_fn"):
            module.forward = functools.partial(gated_mlp_forward, module, invariant=invariant)  # type: ignore[method-assign]
            count += 1
    return count
