"""Sums of squares in float64, a block of the tensor at a time.

A float32 sum over a real vocabulary's embedding is off in the fourth digit on CPU, and by
a different amount for each sharding, so weight norms accumulate in float64. Casting the
whole tensor first (`vector_norm(p, dtype=float64)`, `p.double()`) makes a float64 copy of
it: at Qwen2.5's 151,936 x 896 embedding, 1.04 GiB for a moment, which was the update's
peak memory. Here each block of `BLOCK` values is cast alone.
"""

from __future__ import annotations

import torch

BLOCK = 1 << 20  # values per float64 block: 8 MiB


@torch.no_grad()
def square_sum(tensor: torch.Tensor, block: int = BLOCK) -> torch.Tensor:
    """sum(tensor ** 2) in float64 (a 0-d tensor on the tensor's device)."""
    flat = tensor.detach().reshape(-1)
    total = torch.zeros((), dtype=torch.float64, device=tensor.device)
    for start in range(0, flat.numel(), block):
        piece = flat[start : start + block].double()
        total += torch.dot(piece, piece)
    return total
