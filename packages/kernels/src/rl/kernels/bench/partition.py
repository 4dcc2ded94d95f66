"""Benchmark of balanced partitioning: balance quality over random instances, and time per call.

Balance: `--instances` random batches (log-normal lengths, k cycling over
`--ks`, n/k uniform in [2, 64]) split into k parts by Karmarkar–Karp (`kk`, and
`kk-equal-size`) and by the greedy LPT baseline (`greedy`: longest first, each
into the lightest part). Reported per k: max part / lower bound, where the
lower bound max(mean part, max item) holds for any partition, and max / mean.
Token budget: `token_budget_partition` against plain first-fit decreasing on
the same lengths with a cap (`--cap`, also the longest length): parts vs
ceil(sum / cap), balance of the workloads as above, and how often Karmarkar–Karp
missed the cap so that the greedy fallback gave the parts.
Time: median per call of the C++ and Python implementations (and verl's
`karmarkar_karp` when verl imports).
"""

from __future__ import annotations

import argparse
import heapq
import math
import os
import random
import statistics
from collections.abc import Callable
from pathlib import Path

import torch

from rl.kernels import partition
from rl.kernels.bench.harness import environment_tags, report, time_fn

COLUMNS = [
    "section",
    "provider",
    "model",
    "k",
    "n",
    "instances",
    "mean_ratio_to_bound",
    "p99_ratio_to_bound",
    "max_ratio_to_bound",
    "mean_max_over_mean",
    "parts_at_lower_bound",
    "mean_extra_parts",
    "greedy_fallback_share",
    "median_ms",
    "p20_ms",
    "p80_ms",
]


def random_lengths(rng: random.Random, n: int, median: float, sigma: float, cap: int) -> list[int]:
    return [max(1, min(int(rng.lognormvariate(math.log(median), sigma)), cap)) for _ in range(n)]


def greedy_lpt(workloads: list[float], k: int) -> list[list[int]]:
    """Longest processing time first: each item, heaviest first, into the lightest part."""
    heap = [(0.0, p) for p in range(k)]
    parts: list[list[int]] = [[] for _ in range(k)]
    for i in sorted(range(len(workloads)), key=lambda i: -workloads[i]):
        load, p = heapq.heappop(heap)
        parts[p].append(i)
        heapq.heappush(heap, (load + workloads[i], p))
    return parts


def _ratios(parts: list[list[int]], workloads: list[float]) -> tuple[float, float]:
    sums = [sum(workloads[i] for i in part) for part in parts]
    mean = sum(sums) / len(sums)
    return max(sums) / max(mean, max(workloads)), max(sums) / mean


def _summary(ratios: list[tuple[float, float]]) -> dict[str, float]:
    to_bound = sorted(r[0] for r in ratios)
    return {
        "mean_ratio_to_bound": statistics.fmean(to_bound),
        "p99_ratio_to_bound": to_bound[min(len(to_bound) - 1, int(0.99 * len(to_bound)))],
        "max_ratio_to_bound": to_bound[-1],
        "mean_max_over_mean": statistics.fmean(r[1] for r in ratios),
    }


def balance_rows(args: argparse.Namespace) -> list[dict]:
    rng = random.Random(args.seed)
    methods: dict[str, Callable[[list[float], int], list[list[int]]]] = {
        "kk": partition.karmarkar_karp,
        "kk-equal-size": lambda w, k: partition.karmarkar_karp(w, k, equal_size=True),
        "greedy": greedy_lpt,
    }
    ratios: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for index in range(args.instances):
        k = args.ks[index % len(args.ks)]
        lengths = random_lengths(rng, k * rng.randint(2, 64), args.median, args.sigma, args.cap)
        workloads = partition.sequence_workloads(lengths, args.model)
        for name, method in methods.items():
            ratios.setdefault((name, k), []).append(_ratios(method(workloads, k), workloads))
    return [
        {
            "section": "balance",
            "provider": name,
            "model": args.model,
            "k": k,
            "n": "2k-64k",
            "instances": len(values),
            **_summary(values),
        }
        for (name, k), values in sorted(ratios.items(), key=lambda item: (item[0][1], item[0][0]))
    ]


def budget_rows(args: argparse.Namespace) -> list[dict]:
    rng = random.Random(args.seed + 1)
    stats: dict[str, list[tuple[int, float, float, bool]]] = {
        "token_budget_partition": [],
        "ffd": [],
    }
    for _ in range(args.instances // 10):
        lengths = random_lengths(rng, rng.randint(16, 512), args.median, args.sigma, args.cap)
        workloads = partition.sequence_workloads(lengths, args.model)
        lower_bound = math.ceil(sum(lengths) / args.cap)
        ours = partition.token_budget_partition(lengths, args.cap, workloads=workloads)
        kk = partition.karmarkar_karp(workloads, len(ours))
        fallback = max(sum(lengths[i] for i in part) for part in kk) > args.cap
        for name, parts in (("token_budget_partition", ours), ("ffd", ffd(lengths, args.cap))):
            stats[name].append((len(parts) - lower_bound, *_ratios(parts, workloads), fallback))
    return [
        {
            "section": "token_budget",
            "provider": name,
            "model": args.model,
            "k": "",
            "n": "16-512",
            "instances": len(values),
            **_summary([v[1:3] for v in values]),
            "parts_at_lower_bound": sum(v[0] == 0 for v in values) / len(values),
            "mean_extra_parts": statistics.fmean(v[0] for v in values),
            "greedy_fallback_share": statistics.fmean(v[3] for v in values)
            if name != "ffd"
            else "",
        }
        for name, values in stats.items()
    ]


def ffd(lengths: list[int], cap: int) -> list[list[int]]:
    return partition.first_fit_decreasing(lengths, cap)


def timing_rows(args: argparse.Namespace) -> list[dict]:
    rng = random.Random(args.seed + 2)
    device = torch.device("cpu")
    rows = []
    peer = _verl_karmarkar_karp()
    for n, k in ((256, 8), (1024, 16), (4096, 64)):
        lengths = random_lengths(rng, n, args.median, args.sigma, args.cap)
        workloads = partition.sequence_workloads(lengths, args.model)
        cap = max(args.cap, -(-sum(lengths) // k))
        calls = {
            "karmarkar_karp": lambda w=workloads, k=k: partition.karmarkar_karp(w, k),
            "token_budget_partition": lambda lens=lengths, w=workloads, c=cap: (
                partition.token_budget_partition(lens, c, workloads=w)
            ),
        }
        for op, call in calls.items():
            for impl in ("cpp", "reference"):
                os.environ["RL_KERNELS_IMPL"] = impl
                timing = time_fn(call, device, repeats=args.repeats, warmup=1)
                rows.append(
                    {"section": op, "provider": impl, "model": args.model, "k": k, "n": n, **timing}
                )
            os.environ.pop("RL_KERNELS_IMPL")
        if peer is not None:
            timing = time_fn(lambda w=lengths, k=k: peer(w, k, False), device, args.repeats, 1)
            rows.append(
                {
                    "section": "karmarkar_karp",
                    "provider": "verl",
                    "model": "tokens",
                    "k": k,
                    "n": n,
                    **timing,
                }
            )
    return rows


def _verl_karmarkar_karp():
    try:
        from verl.utils.seqlen_balancing import karmarkar_karp
    except ImportError:
        return None
    return karmarkar_karp


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rl.kernels.bench partition")
    parser.add_argument("--instances", type=int, default=10_000)
    parser.add_argument("--ks", type=int, nargs="+", default=[2, 4, 8, 16])
    parser.add_argument("--model", choices=partition.WORKLOAD_MODELS, default="tokens")
    parser.add_argument("--median", type=float, default=1024.0, help="median sequence length")
    parser.add_argument("--sigma", type=float, default=1.0, help="log-normal sigma of lengths")
    parser.add_argument("--cap", type=int, default=16384, help="longest sequence; token cap")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--csv", type=Path, default=Path("benchmarks/results/partition.csv"))
    args = parser.parse_args(argv)
    if "RL_KERNELS_IMPL" in os.environ:
        parser.error("unset RL_KERNELS_IMPL: the timing section sets it per implementation")
    rows = balance_rows(args) + budget_rows(args) + timing_rows(args)
    tags = environment_tags(torch.device("cpu"))
    rows = [{**tags, **{c: row.get(c, "") for c in COLUMNS}} for row in rows]
    report(rows, COLUMNS, args.csv)
    return 0
