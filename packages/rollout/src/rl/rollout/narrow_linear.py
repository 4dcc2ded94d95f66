"""Decode-step linear layers on CPU as weight @ inputs^T, in blocks of weight rows.

A decode step multiplies a few rows (one token per sequence) by every weight of the model.
`F.linear(x, W)` with x [rows, in] and W [out, in] is x @ W^T; for few rows the CPU BLAS
(MKL on AVX2) runs that orientation far below its speed. `mm(W, x^T)` streams W's rows
once; for a wide layer (the LM head) blocks of `BLOCK_ROWS` weight rows keep the output
block in cache, where it is transposed into the [rows, out] result. At the Qwen2.5-0.5B
shape, 32 rows, 2 threads: the LM head (W [151936, 896]) 358 -> 133 ms and an MLP projection 8.2 -> 4.5 ms (`python -m
rl.rollout.bench.narrow_linear`; benchmarks/rollout/). The product is the same
in another summation order (the last bits of rounding differ). Only inference with
`NARROW_MIN_ROWS` to `NARROW_ROWS` rows on CPU takes this path; prefill and anything under
autograd keep `F.linear`. Small layers keep it too: below `NARROW_MIN_WEIGHTS` weights
(and below 16 rows) the blocks' Python and copies cost more than the orientation saves
(a 2-core AMD EPYC, 32 rows: [896, 896] 552 vs 557 us; [64, 64] 11 vs 51 us, which made
the tiny demo model's decode steps 2x slower; 8 rows at [4864, 896]: 2.6 vs 4.2 ms).
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

NARROW_ROWS = 64
NARROW_MIN_ROWS = 16
NARROW_MIN_WEIGHTS = 1 << 22  # 4M weights (16 MiB in fp32): an MLP projection at 0.5B
BLOCK_ROWS = 2048


def narrow_linear(module: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """`module(x)`, as weight @ x^T when x has few rows, on CPU and without autograd."""
    return narrow_product(x, module.weight, module.bias)


def narrow_product(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """`F.linear(x, weight, bias)`, as weight @ x^T in blocks of weight rows when x has
    few rows, on CPU and without autograd."""
    rows = x.numel() // x.shape[-1] if x.shape[-1] else 0
    narrow = NARROW_MIN_ROWS <= rows <= NARROW_ROWS
    narrow = narrow and x.device.type == "cpu" and x.dtype == weight.dtype
    if not narrow or torch.is_grad_enabled():
        return F.linear(x, weight, bias)
    inputs = x.reshape(rows, x.shape[-1]).t().contiguous()
    width = weight.shape[0]
    result = torch.empty(rows, width, dtype=x.dtype)
    # each block's [block, rows] product goes to a buffer that stays in cache and is
    # transposed from there; transposing the whole [width, rows] product at the end walks
    # memory with a stride (LM head at Qwen2.5's vocabulary, 32 rows: 65 -> 59 ms, best of 15)
    block = torch.empty(min(BLOCK_ROWS, width), rows, dtype=x.dtype)
    for start in range(0, width, BLOCK_ROWS):
        product = block[: min(BLOCK_ROWS, width - start)]
        torch.mm(weight[start : start + BLOCK_ROWS], inputs, out=product)
        result[:, start : start + BLOCK_ROWS].copy_(product.t())
    if bias is not None:
        result += bias
    return result.reshape(*x.shape[:-1], width)


def use_narrow_linears(model: torch.nn.Module) -> int:
    """Route every `nn.Linear` of `model` with at least `NARROW_MIN_WEIGHTS` weights through
    `narrow_linear` (parameters, names and ties untouched: only the instances' `forward`);
    returns how many."""
    count = 0
    for module in model.modules():
        if type(module) is torch.nn.Linear and module.weight.numel() >= NARROW_MIN_WEIGHTS:
            module.forward = functools.partial(narrow_linear, module)  # type: ignore[method-assign]
            count += 1
    return count
