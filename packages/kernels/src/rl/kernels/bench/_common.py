"""Shared helpers of the kernel benchmarks: timing with quantiles, device tags, CSV rows."""

from __future__ import annotations

import csv
import datetime
import importlib.metadata
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_fn(
    fn: Callable[[], Any], device: torch.device, repeats: int = 20, warmup: int = 3
) -> dict[str, float]:
    """Median, p20 and p80 wall time of `fn` in milliseconds (device-synchronised)."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        synchronize(device)
        samples.append((time.perf_counter() - start) * 1e3)
    quantiles = statistics.quantiles(samples, n=5) if len(samples) > 1 else samples * 4
    return {"median_ms": statistics.median(samples), "p20_ms": quantiles[0], "p80_ms": quantiles[3]}


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu:{platform.processor() or platform.machine()}x{torch.get_num_threads()}"


def environment_tags(device: torch.device) -> dict[str, str]:
    def version(name: str) -> str:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return ""

    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "device": device_name(device),
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "",
        "triton": version("triton"),
        "rl_kernels": version("rl-kernels"),
    }


def append_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """Append rows to `path`, writing the header when the file is new."""
    if not rows:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    is_new = not path.exists()
    with path.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        if is_new:
            writer.writeheader()
        writer.writerows(rows)


def print_table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    widths = {c: max(len(c), *(len(_fmt(r.get(c))) for r in rows)) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    for row in rows:
        print("  ".join(_fmt(row.get(c)).ljust(widths[c]) for c in columns))


def _fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)
