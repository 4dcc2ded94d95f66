#!/usr/bin/env python
"""Run the embedded demo (`rl train`) over several seeds and summarise validation accuracy.

    python scripts/demo_seeds.py                      # seeds 1..5, the demo as shipped
    python scripts/demo_seeds.py --seeds 1 2 3 -- actor.optim.lr=1e-3   # with overrides
    python scripts/demo_seeds.py --config examples/visual_squares.yaml --gain 0.1

For each seed it runs `rl train trainer.seed=S` into `<out>/seed_S`, reads
`metrics.jsonl`, and reports the first (before training), last and best validation
accuracy; then the mean ± sd of start and final over seeds, and whether every seed
met the demo's bar: final >= start + 0.20 (`--gain`), and final within 0.05 of the best
(no late collapse). `--config` runs another demo's config instead of the embedded one. The raw per-run rows go to `<out>/demo_seeds.jsonl` and the report to
stdout; `benchmarks/demo_seeds/` in the repo keeps the committed output.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

GAIN = 0.20  # final - start, every seed
COLLAPSE = 0.05  # best - final, every seed


def run_seed(
    seed: int, out: Path, overrides: list[str], config: Path | None = None, gain: float = GAIN
) -> dict:
    folder = out / f"seed_{seed}"
    command = [
        "rl",
        "train",
        *([str(config)] if config is not None else []),
        f"trainer.seed={seed}",
        f"trainer.output_dir={folder}",
        "trainer.progress_bar=false",
        "trainer.resume_mode=disable",
        *overrides,
    ]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"seed {seed} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    accuracy = [(r["step"], r["val/accuracy"]) for r in rows if "val/accuracy" in r]
    values = [a for _, a in accuracy]
    return {
        "seed": seed,
        "start": values[0],
        "final": values[-1],
        "best": max(values),
        "val_accuracy": accuracy,
        "seconds": round(seconds, 1),
        "passed": values[-1] >= values[0] + gain and values[-1] >= max(values) - COLLAPSE,
    }


def describe_environment() -> str:
    """Date, commit, torch version and the ISA overrides that change float rounding."""
    import datetime
    import os

    import torch

    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    isa = {
        key: os.environ[key]
        for key in ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "OMP_NUM_THREADS")
        if key in os.environ
    }
    return (
        f"{datetime.date.today()} commit {commit or '?'} torch {torch.__version__} "
        f"threads {torch.get_num_threads()} cpu capability {torch.backends.cpu.get_cpu_capability()}"
        + (f" env {isa}" if isa else "")
    )


def mean_sd(values: list[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.3f} ± {sd:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--out", type=Path, default=Path("outputs/demo_seeds"))
    parser.add_argument("--config", type=Path, default=None, help="a demo's config file")
    parser.add_argument("--gain", type=float, default=GAIN, help="final - start, every seed")
    parser.add_argument("overrides", nargs="*", help="config overrides passed to `rl train`")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    from rl.core.machine import cpu_model

    cpu = cpu_model()
    name = args.config or "embedded demo"
    print(f"# {name} over seeds {args.seeds}; overrides {args.overrides or 'none'}; CPU {cpu}")
    print(f"# {describe_environment()}")
    results = []
    with (args.out / "demo_seeds.jsonl").open("w") as sink:
        for seed in args.seeds:
            row = run_seed(seed, args.out, args.overrides, args.config, args.gain)
            row["cpu"] = cpu
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            results.append(row)
            trace = " ".join(f"{a:.3f}" for _, a in row["val_accuracy"])
            print(
                f"seed {seed}: start {row['start']:.3f} final {row['final']:.3f} "
                f"best {row['best']:.3f} ({row['seconds']:.0f} s) "
                f"{'ok' if row['passed'] else 'FAIL'} | {trace}",
                flush=True,
            )
    print(f"start {mean_sd([r['start'] for r in results])}")
    print(f"final {mean_sd([r['final'] for r in results])}")
    print(f"gain  {mean_sd([r['final'] - r['start'] for r in results])}")
    failed = [r["seed"] for r in results if not r["passed"]]
    print(f"bar (final >= start + {args.gain}, final >= best - {COLLAPSE}): ", end="")
    print("every seed passed" if not failed else f"failed for seeds {failed}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
