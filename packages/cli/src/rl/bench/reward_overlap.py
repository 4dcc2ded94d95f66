"""Step time with a slow reward, scored in order, in the background or while generating.

    python -m rl.bench reward-overlap                 # 6 steps, 3 interleaved rounds
    python -m rl.bench reward-overlap --steps 4 --rounds 2 -- data.max_response_length=32

The workload is the demo's model (without its SFT warm-start, as `rl.bench modes`) on its
task with the reference log-probs on (a KL loss:
two log-prob passes to hide scoring behind) and a reward that takes as long as generation:
a scorer that sleeps, as a remote sandbox or an LLM judge behind an API keeps the trainer
waiting, `--reward-s` seconds per response. By default the sleep is calibrated first: one
in-order run measures generation (median `timing/generate` over its steps after the
first) and the sleep is that divided by the step's responses, so the reward, scored one
response at a time by a pool of one process, takes about as long as generating them. Each
round then runs both ways (interleaved, so that drifts of this noisy machine hit both), from
the same seed, each in its own `rl train` process:
- in order: generate, score, then the log-prob passes (`reward.launch_reward_fn_async=false`);
- background: scoring starts as generation ends and runs beside the log-prob passes
  (`reward.launch_reward_fn_async=true`, verl's key);
- streamed: the step's prompts generated in 4 chunks of whole groups, each scored while the
  next one generates, the last beside the log-prob passes (`reward.stream_chunks=4`).
A step's time is the trainer's `timing/step` (wall clock); the first step of each run
(warm-up) is left out. The report gives each way's median step, the ratio background / in
order, and how much of the scoring each overlapping way hid (1 - its wait / its scoring).
Raw rows go to `<out>/reward_overlap.jsonl`; `benchmarks/reward_overlap/` keeps committed
output.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from rl.bench.modes import train_steps
from rl.kernels.bench.harness import header

WAYS = {
    "in_order": ["reward.launch_reward_fn_async=false"],
    "background": ["reward.launch_reward_fn_async=true"],
    "streamed": ["reward.launch_reward_fn_async=false", "reward.stream_chunks=4"],
}
OVERLAPPING = ("background", "streamed")
WORKLOAD = [
    "sft.steps=0",  # random weights: long, long-tailed responses (as `rl.bench modes`)
    "data.max_response_length=48",
    "data.train_batch_size=16",
    "rollout.n=4",
    "actor.ppo_mini_batch_size=16",
    "actor.use_kl_loss=true",
    "reward.num_workers=1",
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
    "trainer.progress_bar=false",
    "trainer.resume_mode=disable",
    "trainer.logger=[jsonl]",
]
SCORER = """
import time

from rl.core.rewards import default_compute_score

SECONDS = {seconds!r}


def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    time.sleep(SECONDS)  # a remote judge or sandbox: the trainer waits, the CPU idles
    return default_compute_score(data_source, solution_str, ground_truth, extra_info)
"""


def run(way: str, steps: int, out: Path, seconds: float, overrides: list[str]) -> list[dict]:
    folder = out / way
    folder.mkdir(parents=True, exist_ok=True)
    scorer = folder / "slow_reward.py"
    scorer.write_text(SCORER.format(seconds=seconds))
    reward = f"reward.custom_reward_function.path={scorer}"
    return train_steps([*WORKLOAD, *WAYS[way], reward, *overrides], steps, folder)


def responses(row: dict) -> float:
    """A step's scored responses: the sum of its per-domain counts."""
    return sum(
        value for key, value in row.items() if key.endswith("/count") and key.startswith("reward/")
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m rl.bench reward-overlap", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reward-s", type=float, default=None, help="sleep per response")
    parser.add_argument("--out", type=Path, default=Path("outputs/bench_reward_overlap"))
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(argv)
    if args.steps < 2:
        parser.error("--steps must be at least 2 (the first step of each run is warm-up)")
    args.out.mkdir(parents=True, exist_ok=True)
    seconds = args.reward_s
    if seconds is None:  # calibrate: the reward takes as long as generation
        rows = run("in_order", args.steps, args.out / "calibration", 0.0, args.overrides)
        seconds = statistics.median(row["timing/generate"] / responses(row) for row in rows[1:])
    times: dict[str, list[float]] = {way: [] for way in WAYS}
    scoring: dict[str, list[float]] = {way: [] for way in OVERLAPPING}
    waits: dict[str, list[float]] = {way: [] for way in OVERLAPPING}
    generation: list[float] = []
    with (args.out / "reward_overlap.jsonl").open("w") as raw:
        for round_ in range(args.rounds):
            for way in WAYS:
                rows = run(way, args.steps, args.out / f"round_{round_}", seconds, args.overrides)
                for row in rows:
                    raw.write(json.dumps({"round": round_, "way": way, **row}) + "\n")
                for row in rows[1:]:
                    times[way].append(row["timing/step"])
                    generation.append(row["timing/generate"])
                    if way in OVERLAPPING:
                        scoring[way].append(row["timing/reward_background"])
                        waits[way].append(row["timing/reward"])
    medians = {way: statistics.median(values) for way, values in times.items()}
    where = header("cpu", ["transformers", "rl-core", "rl-cli"])
    print(f"# reward-overlap benchmark, {', '.join(f'{k} {v}' for k, v in where.items() if v)}")
    print(
        f"# workload: {' '.join(WORKLOAD + args.overrides)}; {args.steps} steps x {args.rounds} rounds"
    )
    print(
        f"# reward: {seconds * 1000:.2f} ms per response (sleep); generation median "
        f"{statistics.median(generation):.3f} s, background scoring median "
        f"{statistics.median(scoring['background']):.3f} s"
    )
    for way in WAYS:
        print(f"{way:>11}: median step {medians[way]:.3f} s over {len(times[way])} steps")
    for way in OVERLAPPING:
        ratio = medians[way] / medians["in_order"]
        hidden = 1 - statistics.median(waits[way]) / max(statistics.median(scoring[way]), 1e-9)
        print(f"ratio {way} / in order: {ratio:.3f}; share of the scoring hidden: {hidden:.2f}")


if __name__ == "__main__":
    main()
