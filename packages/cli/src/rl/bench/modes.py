"""Wall time of RL steps in each `trainer.mode` on the same workload, side by side.

    python -m rl.bench modes                    # 8 steps, 3 interleaved rounds
    python -m rl.bench modes --steps 6 --rounds 2 -- data.max_response_length=32
    python -m rl.bench modes --placement disaggregated   # actor and rollout on Ray workers apart
    python -m rl.bench modes --placement disaggregated --shape qwen2.5-0.5b --layers 4

The workload is the tiny demo model *without* its SFT warm-start: its random weights end a
response at EOS with a small, constant chance per token, so response lengths are long-tailed
(geometric, cut at `data.max_response_length`) — the case where waiting for the slowest
rollout costs most. Each round runs every mode once (interleaved, so that drifts of this
noisy machine hit both), from the same seed, in its own `rl train` process. A step's time
is the trainer's `timing/step` (wall clock, waits included); the first step of each run
(warm-up) is left out. Modes: sync, one_step_off, and async with max_staleness 2. The
report gives the median step time of each mode, its ratio to sync, the median share of a
one-step-off step spent waiting for the rollout thread, and the mean staleness. With
`--placement disaggregated` the actor and the rollout run in Ray workers of their own (one
CPU each): generation and learning then overlap in different processes, and the report
adds the measured overlap — from sync's medians, generate g and the rest of the step r, a
mode's step t hides (g + r - t) / min(g, r) of the shorter phase (1: the step takes
max(g, r); 0: their sum).

`--shape NAME --layers N` runs the real-shape workload of `rl.bench grpo-step` instead (a
released model's shape, tokenizer and chat template, random weights, chat-templated GSM8K,
8 prompts x 4 samples; the folder is built once under `--out`). Random weights at a 152K
vocabulary almost never draw EOS, so there every `STOP_EVERY`-th token id ends a response
(`rollout.stop_token_ids`): each token ends it with a chance of about 1 / STOP_EVERY, and
lengths are geometric up to `SHAPE_RESPONSE_TOKENS`.
Raw rows go to `<out>/modes.jsonl`; `benchmarks/modes/` keeps committed output.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from rl.kernels.bench.harness import header

MODES = {  # name -> overrides
    "sync": ["trainer.mode=sync"],
    "one_step_off": ["trainer.mode=one_step_off"],
    "async_s2": ["trainer.mode=async", "trainer.max_staleness=2"],
}
PLACEMENTS = {  # name -> overrides
    "colocated": [],
    "disaggregated": [
        "trainer.launcher=ray",
        "cluster.n_gpus_per_node=2",
        "cluster.placement={actor: [0], rollout: [1]}",
        "cluster.cpus_per_worker=1",
    ],
}
WORKLOAD = [
    "sft.steps=0",
    "data.max_response_length=48",
    "data.train_batch_size=16",
    "rollout.n=4",
    "actor.ppo_mini_batch_size=16",
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
    "trainer.progress_bar=false",
    "trainer.resume_mode=disable",
    "trainer.logger=[jsonl]",
]


STOP_EVERY = 32
SHAPE_RESPONSE_TOKENS = 64


def shape_workload(shape: str, layers: int, steps: int, out: Path) -> list[str]:
    """The real-shape workload's keys (its folder built under `out` once)."""
    from rl.bench import shape_workload as sw
    from rl.bench import workload as w

    folder = out / f"{shape}-{layers}l"
    sw.prepare(folder, shape, layers, steps)
    vocab = json.loads((folder / "model" / "config.json").read_text())["vocab_size"]
    stops = ",".join(str(t) for t in range(STOP_EVERY - 1, vocab, STOP_EVERY))
    return [
        *sw.our_overrides(sw.ShapeRun(shape, layers, folder)),
        f"data.train_batch_size={w.PROMPTS}",
        f"actor.ppo_mini_batch_size={w.PROMPTS}",
        f"rollout.n={w.RESPONSES_PER_PROMPT}",
        f"data.max_response_length={SHAPE_RESPONSE_TOKENS}",
        f"rollout.stop_token_ids=[{stops}]",
    ]


def run(mode: str, steps: int, out: Path, overrides: list[str]) -> list[dict]:
    return train_steps([*WORKLOAD, *MODES[mode], *overrides], steps, out / mode)


def train_steps(overrides: list[str], steps: int, folder: Path) -> list[dict]:
    """The metrics rows of the steps of an `rl train` of `steps` steps into `folder` (the
    benchmark ends, with the run's stderr, when it fails)."""
    command = [
        "rl",
        "train",
        *overrides,
        f"trainer.total_training_steps={steps}",
        f"trainer.output_dir={folder}",
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    return [row for row in rows if "timing/step" in row]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m rl.bench modes", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("outputs/bench_modes"))
    parser.add_argument("--placement", choices=list(PLACEMENTS), default="colocated")
    parser.add_argument("--shape", help="a real model shape (rl.bench grpo-step's workload)")
    parser.add_argument("--layers", type=int, default=4, help="decoder layers of --shape")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(argv)
    if args.steps < 2:
        parser.error("--steps must be at least 2 (the first step of each run is warm-up)")
    args.out.mkdir(parents=True, exist_ok=True)
    shape = []
    if args.shape:
        shape = shape_workload(args.shape, args.layers, args.steps * args.rounds, args.out)
    args.overrides = [*PLACEMENTS[args.placement], *shape, *args.overrides]
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    generate: list[float] = []  # sync's generation, and the rest of its step
    waits: list[float] = []
    staleness: dict[str, list[float]] = {}
    lengths: list[float] = []
    with (args.out / "modes.jsonl").open("w") as raw:
        for round_ in range(args.rounds):
            for mode in MODES:
                rows = run(mode, args.steps, args.out / f"round_{round_}", args.overrides)
                for row in rows:
                    raw.write(json.dumps({"round": round_, "mode": mode, **row}) + "\n")
                for row in rows[1:]:  # the first step warms up
                    times[mode].append(row["timing/step"])
                    lengths.append(row["response/length_mean"])
                    if mode == "sync":
                        generate.append(row["timing/generate"])
                    if mode == "one_step_off":
                        waits.append(row["timing/wait_rollout"] / row["timing/step"])
                    if "rollout/staleness" in row:
                        staleness.setdefault(mode, []).append(row["rollout/staleness"])
    medians = {mode: statistics.median(values) for mode, values in times.items()}
    where = header("cpu", ["transformers", "rl-core", "rl-cli"])
    print(f"# trainer.mode benchmark, {', '.join(f'{k} {v}' for k, v in where.items() if v)}")
    shown = [
        k
        if not k.startswith("rollout.stop_token_ids=")
        else f"rollout.stop_token_ids=[every {STOP_EVERY}-th id]"
        for k in WORKLOAD + args.overrides
    ]
    if args.shape:
        shown.insert(0, f"{args.shape} shape, {args.layers} layers (random weights);")
    print(f"# workload: {' '.join(shown)}; {args.steps} steps x {args.rounds} rounds")
    print(f"# response length: mean of step means {statistics.mean(lengths):.1f} tokens")
    for mode in MODES:
        print(
            f"{mode:>13}: median step {medians[mode]:.3f} s over {len(times[mode])} steps; "
            f"ratio to sync {medians[mode] / medians['sync']:.3f}"
        )
    print(
        f"one_step_off: median share of a step waiting for the rollout {statistics.median(waits):.3f}"
    )
    for mode, values in staleness.items():
        print(f"{mode}: mean rollout staleness {statistics.mean(values):.2f} updates")
    g = statistics.median(generate)
    r = medians["sync"] - g
    print(
        f"sync phases: generate {g:.3f} s, the rest {r:.3f} s; their sum {g + r:.3f} s, "
        f"their max {max(g, r):.3f} s"
    )
    for mode in MODES:
        if mode != "sync":
            print(f"{mode}: overlap {overlap(g, r, medians[mode]):.2f} of the shorter phase hidden")


def overlap(generate: float, rest: float, step: float) -> float:
    """The share of the shorter phase a step of `step` seconds hides: 1 when it takes
    max(generate, rest), 0 when it takes their sum (negative: slower than that)."""
    return (generate + rest - step) / max(min(generate, rest), 1e-9)


if __name__ == "__main__":
    main()
