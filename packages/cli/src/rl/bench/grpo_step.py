"""`python -m rl.bench grpo-step`: our GRPO step side by side with TRL's `GRPOTrainer`.

Each round runs every (side, variant) once, interleaved, each in its own process with the
same thread count, so that drifts of a noisy machine hit both sides alike and each peak RSS
is one run's; the sides take turns at running first. A run's first `--warmup` steps are
left out. The report gives, per variant, the median step time of each side and the ratio
ours / TRL, the median peak RSS, our phase split (median seconds per phase, share of our
median step), and the KL loss of each side's first step (a reference equal to the actor:
exactly 0 expected).

`--shape NAME --layers N` runs the real-shape workload instead (`rl.bench.shape_workload`:
a released model's shape and tokenizer, chat-templated GSM8K prompts, 32 response tokens),
both sides on one folder built once per benchmark run; our side once per `--engines` entry
(hf, vllm) and per `--fused` setting (auto, on, off: actor.use_fused_kernels). There each
run's peak is the process tree's (children included, sampled every 50 ms), ours also per
phase; the report adds the prompt token ids' check between the sides, this machine's fp32
matmul GFLOPS measured in the run, and each phase's model-FLOP utilisation
(`rl.bench.flops`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rl.bench import shape_workload as sw
from rl.bench import workload as w
from rl.core.machine import cpu_model
from rl.kernels.bench.harness import package_versions

RESULT_TAG = "RL_BENCH_RESULT "


def run_child(
    side: str,
    variant: str,
    steps: int,
    threads: int,
    extra: list[str],
    shape: sw.ShapeRun | None = None,
) -> w.RunResult:
    """One run in a fresh process (`--child`), its result parsed from its last tagged line."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "TOKENIZERS_PARALLELISM": "false"}
    command = [sys.executable, "-m", "rl.bench", "grpo-step", "--child", f"{side}:{variant}"]
    command += ["--steps", str(steps), "--threads", str(threads)]
    command += [*(shape.args() if shape else []), *extra]
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    tagged = [line for line in done.stdout.splitlines() if line.startswith(RESULT_TAG)]
    if done.returncode != 0 or not tagged:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-4000:]}")
    return w.RunResult(**json.loads(tagged[-1].removeprefix(RESULT_TAG)))


def child(
    side_variant: str, steps: int, threads: int, extra: list[str], shape: sw.ShapeRun | None
) -> None:
    import torch

    torch.set_num_threads(threads)
    side, variant = side_variant.split(":")
    if side == "ours":
        from rl.bench import grpo_ours

        result = grpo_ours.run(variant, steps, extra, shape)
    else:
        from rl.bench import grpo_trl

        result = grpo_trl.run(variant, steps, shape)
    print(RESULT_TAG + json.dumps(dataclasses.asdict(result)), flush=True)


def trl_available() -> bool:
    return importlib.util.find_spec("trl") is not None


def versions(extra: tuple[str, ...] = ()) -> str:
    names = ("torch", "transformers", "trl", "accelerate", "rl-core", "rl-fsdp", *extra)
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
    lines += w.ours_only_costs(results, warmup)
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


def shape_setup(args: Any, folder: Path, trl: bool) -> tuple[list[sw.ShapeRun], Any]:
    """Build the folder and the rows once, check both sides' prompt ids, measure GFLOPS."""
    from rl.bench import grpo_ours
    from rl.bench.matmul_rate import matmul_gflops
    from rl.bench.shape_report import ShapeContext

    data = sw.prepare(folder, args.shape, args.layers, args.steps)
    runs = [
        sw.ShapeRun(args.shape, args.layers, folder, engine, fused)
        for engine in args.engines
        for fused in args.fused
    ]
    config = grpo_ours.config("plain", args.steps, folder / "check", args.overrides, runs[0])
    ours = sw.our_prompt_ids(config)
    check = "TRL not installed: its prompt ids not compared"
    if trl:
        theirs = sw.trl_prompt_ids(runs[0].model, data)
        differ = [i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b]
        if differ:
            raise SystemExit(
                f"the sides' prompt token ids differ at rows {differ[:5]}: ours "
                f"{ours[differ[0]][:40]}..., TRL's {theirs[differ[0]][:40]}..."
            )
        check = f"prompt token ids identical on both sides ({len(ours)} rows)"
    model_config = json.loads((runs[0].model / "config.json").read_text())
    actor = config.actor
    shared = actor.use_prefix_grouper
    if shared is None:
        shared = actor.use_remove_padding and actor.ulysses_sequence_parallel_size == 1
    context = ShapeContext(
        args.shape,
        args.layers,
        model_config,
        [len(ids) for ids in ours],
        check,
        shared_prompts=bool(shared),
        recompute=config.model.gradient_checkpointing,
    )
    context.gflops.append(
        matmul_gflops(model_config["hidden_size"], model_config["intermediate_size"], args.threads)
    )
    return runs, context


def main(argv: list[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m rl.bench grpo-step", description=__doc__)
    parser.add_argument("--steps", type=int, default=12, help="steps per run")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved runs per side")
    parser.add_argument("--warmup", type=int, default=2, help="first steps of a run left out")
    parser.add_argument(
        "--variants",
        default="plain,kl",
        help="plain, kl, invariant (ours only: rollout.batch_invariant), comma-separated",
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, help="folder for grpo_step.jsonl and report.md")
    parser.add_argument("--no-trl", action="store_true", help="our side only")
    parser.add_argument(
        "--shape", choices=sw.SHAPES, help="a real model shape (default: the tiny workload)"
    )
    parser.add_argument("--layers", type=int, help="decoder layers of --shape (default 4)")
    parser.add_argument(
        "--engines", help="our rollout engines with --shape: hf, vllm or both (default hf)"
    )
    parser.add_argument(
        "--fused",
        help="our actor.use_fused_kernels with --shape: auto (the config's default: on for "
        "these vocabularies), on, off, or a list (on,off: both, to show the fused log-prob's "
        "saving)",
    )
    parser.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--engine", help=argparse.SUPPRESS)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument(
        "overrides", nargs="*", help="extra `rl train` overrides for our side (key=value)"
    )
    args = parser.parse_args(argv)
    if args.child:
        shape = None
        if args.shape:
            shape = sw.ShapeRun(args.shape, args.layers, args.workdir, args.engine, args.fused)
        return child(args.child, args.steps, args.threads, args.overrides, shape)
    if args.steps <= args.warmup:
        parser.error(f"--steps ({args.steps}) must exceed --warmup ({args.warmup})")
    variants = [v for v in args.variants.split(",") if v]
    unknown = set(variants) - set(w.VARIANTS)
    if unknown:
        parser.error(f"unknown --variants {sorted(unknown)}; choose from {list(w.VARIANTS)}")
    if args.shape is None:
        given = [f"--{n}" for n in ("layers", "engines", "fused") if getattr(args, n) is not None]
        if given:
            parser.error(f"{', '.join(given)} apply to a real shape only: add --shape NAME")
    else:
        args.layers = 4 if args.layers is None else args.layers
        if args.layers < 1:
            parser.error(f"--layers must be at least 1, not {args.layers}")
        args.engines = _choices(parser, "--engines", args.engines or "hf", sw.ENGINES)
        args.fused = _choices(parser, "--fused", args.fused or "auto", ("auto", "on", "off"))
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
    with contextlib.ExitStack() as stack:
        runs: list[sw.ShapeRun | None] = [None]
        context = None
        if args.shape:
            if args.out is not None:
                folder = args.out / f"{args.shape}-{args.layers}l"
            else:
                folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rl-bench-")))
            # the prompt-id check is cheap (tokenizers only): wherever TRL is importable
            shape_runs, context = shape_setup(args, folder, trl_available())
            runs = list(shape_runs)
        slots = [("ours", run) for run in runs]
        if "trl" in sides:
            slots.append(("trl", runs[0]))
        results = []
        for round_ in range(args.rounds):
            for variant in variants:
                for side, run in slots if round_ % 2 == 0 else slots[::-1]:
                    if side == "trl" and variant in w.OURS_ONLY:
                        continue
                    result = run_child(side, variant, args.steps, args.threads, args.overrides, run)
                    peak = max(result.peak_rss_mib, result.tree_peak_rss_mib)
                    print(
                        f"round {round_} {variant:>5} {side:>4}"
                        f"{f' {run.engine} {run.fused}' if run and side == 'ours' else ''}: "
                        f"median step {statistics.median(result.step_s[args.warmup :]):.4f} s, "
                        f"peak RSS {peak:.0f} MiB",
                        file=sys.stderr,
                        flush=True,
                    )
                    results.append(result)
        if context is not None:
            from rl.bench.matmul_rate import matmul_gflops

            config = context.model_config
            context.gflops.append(
                matmul_gflops(config["hidden_size"], config["intermediate_size"], args.threads)
            )
    if context is None:
        text = report(results, args.warmup, " ".join(argv), args.threads)
    else:
        from rl.bench.shape_report import report as shape_report

        text = shape_report(
            results, args.warmup, " ".join(argv), args.threads, context, versions(("vllm",))
        )
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        with (args.out / "grpo_step.jsonl").open("w") as raw:
            for result in results:
                raw.write(json.dumps(dataclasses.asdict(result)) + "\n")
        (args.out / "report.md").write_text(text)
        if context is not None:
            (args.out / "workload.json").write_text(
                json.dumps(dataclasses.asdict(context), indent=1) + "\n"
            )


def _choices(parser: Any, flag: str, value: str, known: tuple[str, ...]) -> list[str]:
    chosen = [v for v in value.split(",") if v]
    unknown = sorted(set(chosen) - set(known))
    if unknown or not chosen:
        parser.error(f"unknown {flag} {unknown}; choose from {list(known)}")
    return list(dict.fromkeys(chosen))
