"""This machine's fp32 matmul throughput, measured with the run's thread count."""

from __future__ import annotations

import time


def matmul_gflops(hidden: int, intermediate: int, threads: int, tokens: int = 512) -> float:
    """GFLOPS of torch.mm at the model's own shapes: [tokens, hidden] x [hidden, inter] and
    [tokens, inter] x [inter, hidden], fp32, `threads` threads; one warm-up, then the total
    FLOPs over the total time of three rounds of both."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        generator = torch.Generator().manual_seed(0)
        pairs = [
            (torch.randn(tokens, hidden, generator=generator),
             torch.randn(hidden, intermediate, generator=generator)),
            (torch.randn(tokens, intermediate, generator=generator),
             torch.randn(intermediate, hidden, generator=generator)),
        ]  # fmt: skip
        for a, b in pairs:
            torch.mm(a, b)
        flops = 0.0
        started = time.perf_counter()
        for _ in range(3):
            for a, b in pairs:
                torch.mm(a, b)
                flops += 2.0 * a.shape[0] * a.shape[1] * b.shape[1]
        return flops / (time.perf_counter() - started) / 1e9
    finally:
        torch.set_num_threads(before)
