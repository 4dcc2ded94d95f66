"""Benchmark of bucket pack/unpack (weight resharding) against plain torch.

Providers: ours (the op with the implementation chosen for the device),
`torch-copy` (one `copy_` per tensor into the bucket: the reference), and
`torch-cat` (cast each tensor, then `torch.cat`). The hardware limit is a
plain device copy of the same number of bytes, measured in the same run.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from rl.kernels import _backend
from rl.kernels.bench.harness import environment_tags, report, time_fn
from rl.kernels.ops.bucket import available_impls, bucket_pack, pack_reference

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# The printed table; the CSV keeps every column of the rows.
COLUMNS = [
    "device",
    "provider",
    "tensors",
    "mbytes",
    "src",
    "bucket",
    "median_ms",
    "gb_per_s",
    "pct_of_copy_limit",
]


def make_weights(total_mb: float, count: int, dtype: torch.dtype, device: torch.device):
    """`count` tensors of varied (odd) sizes summing to about `total_mb` megabytes."""
    per_tensor = max(int(total_mb * 2**20 / dtype.itemsize / count), 1)
    sizes = [
        per_tensor + (i * 7919) % max(per_tensor // 4, 1) - per_tensor // 8 for i in range(count)
    ]
    return [torch.randn(max(s, 1), device=device).to(dtype) for s in sizes]


def run(args: argparse.Namespace) -> list[dict]:
    device = torch.device(args.device)
    src_dtype, bucket_dtype = DTYPES[args.src_dtype], DTYPES[args.bucket_dtype]
    tensors = make_weights(args.total_mb, args.count, src_dtype, device)
    offsets, cursor = [], 0
    for tensor in tensors:
        offsets.append(cursor)
        cursor += tensor.numel()
    bucket = torch.empty(cursor, dtype=bucket_dtype, device=device)
    moved_bytes = sum(t.numel() for t in tensors) * (src_dtype.itemsize + bucket_dtype.itemsize)
    source = torch.empty(moved_bytes // 2, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)

    providers = {
        f"ours-{_backend.choose_impl('bucket', device.type, available_impls(device.type))}": (
            lambda: bucket_pack(tensors, offsets, bucket)
        ),
        "torch-copy": lambda: pack_reference(tensors, offsets, bucket),
        "torch-cat": lambda: torch.cat([t.reshape(-1).to(bucket_dtype) for t in tensors]),
        "limit-copy": lambda: target.copy_(source),
    }
    # The limit is timed once and reported as its own row (100% by definition).
    timings = {"limit-copy": time_fn(providers.pop("limit-copy"), device, args.repeats)}
    timings |= {name: time_fn(fn, device, args.repeats) for name, fn in providers.items()}
    limit = timings["limit-copy"]["median_ms"]
    tags = environment_tags(device)
    rows = []
    for name, timing in timings.items():
        rows.append(
            {
                **tags,
                "op": "bucket_pack",
                "provider": name,
                "tensors": args.count,
                "mbytes": round(args.total_mb, 1),
                "src": args.src_dtype,
                "bucket": args.bucket_dtype,
                **timing,
                "gb_per_s": moved_bytes / timing["median_ms"] / 1e6,
                "pct_of_copy_limit": 100.0 * limit / timing["median_ms"],
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rl.kernels.bench bucket")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--total-mb", type=float, default=256.0)
    parser.add_argument("--count", type=int, default=300, help="number of tensors")
    parser.add_argument("--src-dtype", choices=DTYPES, default="fp32")
    parser.add_argument("--bucket-dtype", choices=DTYPES, default="bf16")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--csv", type=Path, default=Path("benchmarks/results/bucket.csv"))
    args = parser.parse_args(argv)
    report(run(args), COLUMNS, args.csv)
    return 0
