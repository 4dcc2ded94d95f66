"""A decode step's LM head on CPU three ways, side by side in one process:
`F.linear(x, W)`, `narrow_product` (weight @ x^T in blocks of weight rows, what the HF
engine's large layers and vLLM's vocabulary heads use here) and, where vLLM is installed,
vLLM's oneDNN product on a packed copy of W (what its CPU backend builds for every
linear layer, at the cost of that copy).

    python -m rl.rollout.bench.narrow_linear                     # Qwen2.5's LM head
    python -m rl.rollout.bench.narrow_linear --out 896 --in 4864 # an MLP projection

Each round times every way once, alternating the order; the products are checked close.
Reports the median milliseconds per call and each way's ratio to `narrow_product`.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch


def ways(x: torch.Tensor, weight: torch.Tensor) -> dict[str, Callable[[], torch.Tensor]]:
    """The products to time, by name (vLLM's only where it is installed)."""
    from rl.rollout.narrow_linear import narrow_product

    found: dict[str, Callable[[], torch.Tensor]] = {
        "F.linear": lambda: torch.nn.functional.linear(x, weight),
        "narrow_product": lambda: narrow_product(x, weight),
    }
    try:
        import vllm._custom_ops as ops
    except ImportError:
        return found
    handler = ops.create_onednn_mm(weight.t(), 32)  # vLLM's packed copy
    found["vllm_onednn_packed"] = lambda: ops.onednn_mm(handler, x, None)
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m rl.rollout.bench.narrow_linear", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--rows", type=int, default=32, help="rows of x (decoding sequences)")
    parser.add_argument("--out", type=int, default=151936, help="weight rows (the vocabulary)")
    parser.add_argument("--in", dest="inner", type=int, default=896, help="hidden size")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(args.out, args.inner, generator=generator) * 0.02
    x = torch.randn(args.rows, args.inner, generator=generator)
    products = ways(x, weight)
    times: dict[str, list[float]] = {name: [] for name in products}
    with torch.inference_mode():
        want = products["F.linear"]()
        for name, product in products.items():
            torch.testing.assert_close(product(), want, rtol=1e-4, atol=1e-4, msg=name)
        for round_ in range(args.rounds):
            order = list(products) if round_ % 2 == 0 else list(products)[::-1]
            for name in order:
                started = time.perf_counter()
                products[name]()
                times[name].append(time.perf_counter() - started)
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(
        f"x [{args.rows}, {args.inner}] @ W[{args.out}, {args.inner}]^T, {args.threads} threads, "
        f"{args.rounds} rounds, torch {torch.__version__}"
    )
    for name, value in medians.items():
        ratio = value / medians["narrow_product"]
        print(f"{name:>20}: median {value * 1e3:8.2f} ms  ({ratio:.2f}x narrow_product)")


if __name__ == "__main__":
    main()
