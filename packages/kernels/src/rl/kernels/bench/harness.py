"""The benchmark harness every package's benchmarks share (public: `rl.kernels.bench.harness`).

It lives in rl-kernels because every package may import it without breaking the
dependency direction (kernels depends on nothing of ours; core uses kernels; the rest
use core). What it does:

- timing: `elapsed` (one device-synchronised call), `time_fn` (warm-up, then median,
  p20 and p80 in ms), `quantiles` of any samples, `alternating` (the order of sides in
  an interleaved round, so that drifts of a noisy machine hit every side alike);
- a header of where a figure was measured: `header` (date, device, python, torch and
  the versions of named distributions), `environment_tags` (the columns of the kernel
  CSV files, kept as they are so rows appended to committed files line up);
- output: `append_csv`, `append_jsonl` / `write_jsonl`, `print_table`, and `report`
  (the table and the CSV rows a benchmark's `main` ends with).
"""

from __future__ import annotations

import csv
import datetime
import importlib.metadata
import json
import platform
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import torch


def synchronize(device: torch.device | None) -> None:
    """Wait for queued GPU work on `device` (nothing to wait for on CPU or None)."""
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)


def elapsed(fn: Callable[[], Any], device: torch.device | None = None) -> float:
    """Seconds one call of `fn` takes, synchronised with `device` before and after."""
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def quantiles(samples: Sequence[float]) -> dict[str, float]:
    """Median, p20 and p80 of `samples` (all three equal for one sample)."""
    cuts = statistics.quantiles(samples, n=5) if len(samples) > 1 else list(samples) * 4
    return {"median": statistics.median(samples), "p20": cuts[0], "p80": cuts[3]}


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
    return {f"{key}_ms": value for key, value in quantiles(samples).items()}


def alternating(names: Iterable[str], round_: int) -> list[str]:
    """The order of `names` in interleaved round `round_`: as given, reversed every other."""
    order = list(names)
    return order if round_ % 2 == 0 else order[::-1]


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu:{platform.processor() or platform.machine()}x{torch.get_num_threads()}"


def package_version(name: str) -> str:
    """The installed version of distribution `name` ("" when it is not installed)."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return ""


def package_versions(names: Iterable[str]) -> dict[str, str]:
    """{distribution: version} of those of `names` that are installed."""
    found = {name: package_version(name) for name in names}
    return {name: version for name, version in found.items() if version}


def utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def header(device: torch.device | str = "cpu", packages: Iterable[str] = ()) -> dict[str, Any]:
    """Where and with what a benchmark ran: date (UTC), device name, python, torch, CUDA,
    and the versions of the distributions `packages` (rl-* and peers) that are installed."""
    device = torch.device(device)
    return {
        "date": utc_now(),
        "device": device_name(device),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "",
        **package_versions(packages),
    }


def environment_tags(device: torch.device) -> dict[str, str]:
    """The device/version columns of the kernel benchmarks' CSV rows."""
    return {
        "date": utc_now(),
        "device": device_name(device),
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "",
        "triton": package_version("triton"),
        "rl_kernels": package_version("rl-kernels"),
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


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]], *, append: bool = False) -> None:
    """Rows to `path` as JSON lines (replacing the file, or appending with `append`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a" if append else "w") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)


def append_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    write_jsonl(path, rows, append=True)


def print_table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    widths = {c: max(len(c), *(len(_fmt(r.get(c))) for r in rows)) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    for row in rows:
        print("  ".join(_fmt(row.get(c)).ljust(widths[c]) for c in columns))


def report(rows: list[dict[str, Any]], columns: list[str], csv_path: Path) -> None:
    """The end of every benchmark's `main`: print `columns` of the rows as a table and
    append the rows (all their columns) to `csv_path`."""
    print_table(rows, columns)
    append_csv(csv_path, rows)
    print(f"appended {len(rows)} rows to {csv_path}")


def _fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)
