"""`python -m rl.bench grpo-step`: our GRPO step side by side with TRL's `GRPOTrainer`.

Each round runs every (side, variant) once, interleaved, each in its own process with the
same thread count, so that drifts of a noisy machine hit both sides alike and each peak RSS
is one run's; the sides take turns at running first. A run's first `--warmup` steps are
left out. The report gives, per variant, the median step time of each side and the ratio
ours / TRL, the median peak RSS, our phase split (median seconds per phase, share of our
median step), and the KL loss of each side's first step (a reference equal to the actor:
exactly 0 expected).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rl.bench import workload as w
from rl.core.machine import cpu_model
from rl.kernels.bench.harness import package_versions

RESULT_TAG = "RL_BENCH_RESULT "


def run_child(side: str, variant: str, steps: int, threads: int, extra: list[str]) -> w.RunResult:
    """One run in a fresh process (`--child`), its result parsed from its last tagged line."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "TOKENIZERS_PARALLELISM": "false"}
    command = [sys.executable, "-m", "rl.bench", "grpo-step", "--child", f"{side}:{variant}"]
    command += ["--steps", str(steps), "--threads", str(threads), *extra]
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    tagged = [line for line in done.stdout.splitlines() if line.startswith(RESULT_TAG)]
    if done.returncode != 0 or not tagged:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-4000:]}")
    return w.RunResult(**json.loads(tagged[-1].removeprefix(RESULT_TAG)))


def child(side_variant: str, steps: int, threads: int, extra: list[str]) -> None:
    import torch

    torch.set_num_threads(threads)
    side, variant = side_variant.split(":")
    if side == "ours":
        from rl.bench import grpo_ours

        result = grpo_ours.run(variant, steps, extra)
    else:
        from rl.bench import grpo_trl

        result = grpo_trl.run(variant, steps)
    print(RESULT_TAG + json.dumps(dataclasses.asdict(result)), flush=True)


def trl_available() -> bool:
    return importlib.util.find_spec("trl") is not None


def versions() -> str:
    names = ("torch", "transformers", "trl", "accelerate", "rl-core", "rl-fsdp")
    return ", ".join(f"{name} {version}" for name, version in package_versions(names).items())


def report(results: list[w.RunResult], warmup: int, args_line: str, threads: int) -> str:
    lines = [
        f"# rl.bench grpo-step, {time.strftime('%Y-%m-%d %H:%M %Z')}",
        f"# machine: {cpu_model()}, {os.cpu_count()} cores; {threads} threads per run; "
        f"python {sys.version.split()[0]}",
        f"# versions: {versions()}",
        f"# command: python -m rl.bench grpo-step {args_line}",
        f"# workload: tiny Qwen2 (309K params), {w.PROMPTS} prompts x {w.RESPONSES_PER_PROMPT} "
        f"responses x <= {w.MAX_RESPONSE_TOKENS} tokens, 1 optimizer step per step, "
        f"lr {w.LEARNING_RATE}; kl: k3 KL loss, coef {w.KL_COEF}, reference model",
        "",
        "| variant | side | median step (s) | steps | ratio ours/TRL | median peak RSS (MiB) "
        "| first-step KL |",
        "|---|---|---|---|---|---|---|",
    ]
    medians: dict[tuple[str, str], float] = {}
    for variant in dict.fromkeys(r.variant for r in results):
        for side in ("ours", "trl"):
            runs = [r for r in results if r.side == side and r.variant == variant]
            if not runs:
                continue
            steps = [s for r in runs for s in r.step_s[warmup:]]
            medians[side, variant] = statistics.median(steps)
            ratio = ""
            if side == "trl" and ("ours", variant) in medians:
                ratio = f"{medians['ours', variant] / medians['trl', variant]:.3f}"
            kls = [r.first_step_kl for r in runs if r.first_step_kl is not None]
            lines.append(
                f"| {variant} | {side} | {medians[side, variant]:.4f} | {len(steps)} | {ratio} "
                f"| {statistics.median(r.peak_rss_mib for r in runs):.0f} "
                f"| {', '.join(f'{k:.3g}' for k in kls) if kls else '-'} |"
            )
    lines += round_ratios(results, warmup)
    lines += ["", "Our phase split (median seconds; share of our median step):", ""]
    for variant in dict.fromkeys(r.variant for r in results):
        ours = [r for r in results if r.side == "ours" and r.variant == variant]
        if not ours:
            continue
        phases: dict[str, list[float]] = {}
        for r in ours:
            for phase, values in r.phases.items():
                phases.setdefault(phase, []).extend(values[warmup:])
        step = medians["ours", variant]
        split = ", ".join(
            f"{phase} {statistics.median(v):.4f} ({statistics.median(v) / step:.0%})"
            for phase, v in phases.items()
        )
        lines.append(f"- {variant}: {split}")
    return "\n".join(lines) + "\n"


def round_ratios(results: list[w.RunResult], warmup: int) -> list[str]:
    """Each round's ratio ours / TRL (the two ran back to back): the spread says how far
    the machine's drift moves one comparison."""
    lines = []
    for variant in dict.fromkeys(r.variant for r in results):
        pairs = zip(
            [r for r in results if r.side == "ours" and r.variant == variant],
            [r for r in results if r.side == "trl" and r.variant == variant],
            strict=False,
        )
        ratios = [
            statistics.median(o.step_s[warmup:]) / statistics.median(t.step_s[warmup:])
            for o, t in pairs
        ]
        if ratios:
            if not lines:
                lines = ["", "Each round's ratio ours / TRL (run back to back):", ""]
            listed = ", ".join(f"{r:.2f}" for r in ratios)
            lines.append(f"- {variant}: {listed} (median {statistics.median(ratios):.2f})")
    return lines


def main(argv: list[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m rl.bench grpo-step", description=__doc__)
    parser.add_argument("--steps", type=int, default=12, help="steps per run")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved runs per side")
    parser.add_argument("--warmup", type=int, default=2, help="first steps of a run left out")
    parser.add_argument("--variants", default="plain,kl", help="plain, kl or both")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, help="folder for grpo_step.jsonl and report.md")
    parser.add_argument("--no-trl", action="store_true", help="our side only")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument(
        "overrides", nargs="*", help="extra `rl train` overrides for our side (key=value)"
    )
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child, args.steps, args.threads, args.overrides)
    if args.steps <= args.warmup:
        parser.error(f"--steps ({args.steps}) must exceed --warmup ({args.warmup})")
    variants = [v for v in args.variants.split(",") if v]
    unknown = set(variants) - set(w.VARIANTS)
    if unknown:
        parser.error(f"unknown --variants {sorted(unknown)}; choose from {list(w.VARIANTS)}")
    sides = ["ours"]
    if not args.no_trl:
        if not trl_available():
            print(
                "TRL is not installed: timing our side only "
                "(pip install 'rl-cli[bench]' for the side-by-side run)",
                file=sys.stderr,
            )
        else:
            sides.append("trl")
    results = []
    for round_ in range(args.rounds):
        for variant in variants:
            for side in sides if round_ % 2 == 0 else sides[::-1]:
                result = run_child(side, variant, args.steps, args.threads, args.overrides)
                print(
                    f"round {round_} {variant:>5} {side:>4}: median step "
                    f"{statistics.median(result.step_s[args.warmup :]):.4f} s, "
                    f"peak RSS {result.peak_rss_mib:.0f} MiB",
                    file=sys.stderr,
                    flush=True,
                )
                results.append(result)
    text = report(results, args.warmup, " ".join(argv), args.threads)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        with (args.out / "grpo_step.jsonl").open("w") as raw:
            for result in results:
                raw.write(json.dumps(dataclasses.asdict(result)) + "\n")
        (args.out / "report.md").write_text(text)
