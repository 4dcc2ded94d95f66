"""Benchmark of fused log-prob + entropy against naive torch, chunked torch and peers.

Providers: `ours` (implementation chosen for the device), `torch-chunked` (the
op with the torch reference epilogue), `naive` (full fp32 logits, log_softmax,
gather, entropy), on CUDA `torch-compile` (naive under torch.compile), and Liger-Kernel's fused linear cross-entropy and verl's
`linear_cross_entropy` when importable. Reports median forward and
forward+backward times, peak extra memory (CUDA), and the share of the 4-GEMM
roofline (8·T·H·V flops at the bf16 matmul rate measured in the same run).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from rl.kernels.bench.harness import environment_tags, report, synchronize, time_fn
from rl.kernels.ops.logprob import fused_logprob_entropy

# The printed table; the CSV keeps every column of the rows.
COLUMNS = [
    "device",
    "provider",
    "T",
    "H",
    "V",
    "fwd_ms",
    "fwd_bwd_ms",
    "peak_extra_mib",
    "pct_of_roofline",
]
CPU_SHAPES = [(1024, 512, 16384)]  # the issue's shapes take hours on a CPU
ISSUE_SHAPES = [
    (t, h, v)
    for t in (4096, 8192, 16384, 32768)
    for h, v in ((4096, 131072), (3584, 152064), (5120, 152064))
]


def naive(
    hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    logits = (hidden @ weight.t()).float()
    logp = torch.log_softmax(logits, -1)
    return logp.gather(1, labels[:, None])[:, 0], -(logp.exp() * logp).sum(-1)


def ours(impl: str | None) -> Callable[..., Any]:
    def run(hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor) -> Any:
        previous = os.environ.get("RL_KERNELS_IMPL")
        if impl is not None:
            os.environ["RL_KERNELS_IMPL"] = impl
        try:
            return fused_logprob_entropy(hidden, weight, labels)
        finally:
            if impl is not None:
                os.environ.pop("RL_KERNELS_IMPL") if previous is None else os.environ.update(
                    RL_KERNELS_IMPL=previous
                )

    return run


def peers() -> dict[str, Callable[..., Any]]:
    """Peer implementations that import here (GPU wheels of Liger-Kernel and verl)."""
    found: dict[str, Callable[..., Any]] = {}
    try:
        from verl.utils.kernel.linear_cross_entropy import linear_cross_entropy

        found["verl"] = lambda h, w, y: linear_cross_entropy(h, w, y, 1.0, "none")
    except Exception:
        pass
    try:
        from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy

        found["liger"] = lambda h, w, y: (
            -liger_fused_linear_cross_entropy(h, w, y, reduction="none"),
            None,
        )
    except Exception:
        pass
    return found


def providers_for(device: torch.device) -> dict[str, Callable[..., Any]]:
    """Ours, the torch baselines and, on CUDA, `torch-compile` (naive under
    `torch.compile`: what a user gets from the compiler alone) and the peers that import."""
    providers: dict[str, Callable[..., Any]] = {
        "ours": ours(None),
        "torch-chunked": ours("reference"),
        "naive": naive,
    }
    if device.type == "cuda":
        providers["torch-compile"] = torch.compile(naive, dynamic=False)
        providers.update(peers())
    return providers


BASELINES = ("ours", "torch-chunked", "naive")


def matmul_tflops(device: torch.device, dtype: torch.dtype) -> float:
    """Measured dense matmul rate (the roofline's peak), TFLOP/s."""
    size = 8192 if device.type == "cuda" else 512
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    ms = time_fn(lambda: a @ b, device, repeats=10)["median_ms"]
    return 2 * size**3 / ms / 1e9


def measure(
    fn: Callable[..., Any], tensors: tuple[torch.Tensor, ...], device: torch.device, repeats: int
) -> dict[str, float | None]:
    hidden, weight, labels = tensors

    def forward() -> Any:
        with torch.no_grad():
            return fn(hidden, weight, labels)

    def forward_backward() -> None:
        h, w = hidden.detach().requires_grad_(True), weight.detach().requires_grad_(True)
        logprob, entropy = fn(h, w, labels)
        loss = logprob.sum() + (entropy.sum() if entropy is not None else 0.0)
        loss.backward()

    fwd = time_fn(forward, device, repeats)["median_ms"]
    peak = None
    if device.type == "cuda":
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
    both = time_fn(forward_backward, device, repeats)["median_ms"]
    if device.type == "cuda":
        peak = (torch.cuda.max_memory_allocated(device) - base) / 2**20
    return {"fwd_ms": fwd, "fwd_bwd_ms": both, "peak_extra_mib": peak}


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    device = torch.device(args.device)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    if args.shape:
        shapes = [tuple(int(x) for x in args.shape.split(","))]
    else:
        shapes = ISSUE_SHAPES if device.type == "cuda" else CPU_SHAPES
    providers = providers_for(device)
    peak_tflops = matmul_tflops(device, dtype)
    tags, rows = environment_tags(device), []
    for tokens, hidden_size, vocab in shapes:
        g = torch.Generator(device=device).manual_seed(0)
        tensors = (
            torch.randn(tokens, hidden_size, device=device, dtype=dtype, generator=g),
            torch.randn(vocab, hidden_size, device=device, dtype=dtype, generator=g) * 0.02,
            torch.randint(vocab, (tokens,), device=device, generator=g),
        )
        roofline_ms = 8 * tokens * hidden_size * vocab / (peak_tflops * 1e9)
        for name, fn in providers.items():
            try:
                result = measure(fn, tensors, device, args.repeats)
            except torch.OutOfMemoryError:
                result = {"fwd_ms": None, "fwd_bwd_ms": None, "peak_extra_mib": "OOM"}
            except Exception as error:  # a peer or the compiler failing is a row, not the end
                if name in BASELINES:
                    raise
                print(f"logprob: {name} failed at {tokens}x{hidden_size}x{vocab}: {error!r}")
                # in the column that says "OOM" when memory runs out (the CSV keeps its header)
                failed = f"error: {type(error).__name__}: {str(error)[:200]}"
                result = {"fwd_ms": None, "fwd_bwd_ms": None, "peak_extra_mib": failed}
            both = result["fwd_bwd_ms"]
            rows.append(
                {
                    **tags,
                    "op": "logprob",
                    "provider": name,
                    "T": tokens,
                    "H": hidden_size,
                    "V": vocab,
                    "dtype": args.dtype,
                    **result,
                    "matmul_tflops": peak_tflops,
                    "roofline_ms": roofline_ms,
                    "pct_of_roofline": 100 * roofline_ms / both if both else None,
                }
            )
            if device.type == "cuda":
                torch.cuda.empty_cache()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rl.kernels.bench logprob")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--shape", help="T,H,V (default: the issue's 12 shapes on GPU)")
    parser.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--csv", type=Path, default=Path("benchmarks/results/logprob.csv"))
    args = parser.parse_args(argv)
    report(run(args), COLUMNS, args.csv)
    return 0
