"""Sums of squares in float64, a block of the tensor at a time.

A float32 sum over a real vocabulary's embedding is off in the fourth digit on CPU, and by
a different amount for each sharding, so weight norms accumulate in float64. Casting the
whole of a big tensor first (`vector_norm(p, dtype=float64)`, `p.double()`) makes a
float64 copy of it: at Qwen2.5's 151,936 x 896 embedding, 1.04 GiB for a moment, which
was the update's peak memory. Here each block of `BLOCK` values is cast alone.
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


@torch.no_grad()
def square_sums(tensors: list[torch.Tensor], block: int = BLOCK) -> torch.Tensor:
    """sum(t ** 2) over all `tensors` in float64 (a 0-d tensor on their device; zero when
    there are none). Tensors under `block` values are joined, up to `block` values at a
    time, and summed in one product each: a model's norms and biases (hundreds of small
    tensors) cost a few calls, not five each."""
    parts: list[torch.Tensor] = []
    small: list[torch.Tensor] = []
    size = 0
    for tensor in tensors:
        if tensor.numel() >= block:
            parts.append(square_sum(tensor, block))
            continue
        if size + tensor.numel() > block:
            parts.append(square_sum(torch.cat(small), block))
            small, size = [], 0
        small.append(tensor.detach().reshape(-1))
        size += tensor.numel()
    if small:
        parts.append(square_sum(torch.cat(small), block))
    if not parts:
        device = tensors[0].device if tensors else None
        return torch.zeros((), dtype=torch.float64, device=device)
    return torch.stack(parts).sum()
