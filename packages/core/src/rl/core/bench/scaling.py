"""Step time at 1 rank (local launcher) against 2 Ray ranks, side by side, and the
communication each rank does per step.

    python -m rl.core.bench.scaling [--steps 12] [--repeats 2] [--out benchmarks/scaling]

Runs `rl train` on the embedded demo (plus `--extra` overrides) alternately with
`trainer.launcher=local` and with `trainer.launcher=ray cluster.n_gpus_per_node=2`,
`--repeats` times, and reports the median `timing/*` of the steps after the first two
(warm-up) of each, with the 2-rank / 1-rank ratio. Alongside, `comm_model` counts the
bytes each rank moves per step for the run's model and batch (FSDP2 all-gathers and
reduce-scatters, the weight sync's all-gathers): the figures docs/scaling.md
extrapolates from.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rl.core.micro_batches import Rows

LAUNCHERS = {
    "local_1rank": ["trainer.launcher=local"],
    "ray_2ranks": ["trainer.launcher=ray", "cluster.n_gpus_per_node=2"],
}


def comm_model(
    params: int, world: int, bytes_per_param: int, passes: dict[str, int]
) -> dict[str, float]:
    """Bytes one rank receives (all-gather) or sends (reduce-scatter) per step under FSDP2
    with `reshard_after_forward` (each forward and each backward re-gathers the weights).

    `passes`: forward_only (micro-batch forwards without gradients: old and reference
    log-probs, values), train (micro-batch forward+backward), syncs (weight syncs, one
    per step: every tensor all-gathered to every rank's rollout replica).
    """
    shard = (world - 1) / world * params * bytes_per_param  # one all-gather of the model
    out = {
        "allgather_forward_bytes": shard * (passes["forward_only"] + passes["train"]),
        "allgather_backward_bytes": shard * passes["train"],
        "reduce_scatter_bytes": shard * passes["train"],
        "weight_sync_bytes": shard * passes["syncs"],
    }
    out["total_bytes"] = sum(out.values())
    return out


def demo_passes(config: Any, world: int) -> dict[str, int]:
    """Micro-batch passes per step of `config` on each of `world` ranks."""
    actor = config.actor
    counted = Rows.of(config, actor)
    rows, mini = counted.rows, counted.rows_per_mini
    per_rank_mini = mini // world
    train = (
        (rows // mini)
        * actor.ppo_epochs
        * math.ceil(per_rank_mini / actor.ppo_micro_batch_size_per_gpu)
    )
    forward = math.ceil(rows / world / config.rollout.log_prob_micro_batch_size_per_gpu)
    if config.uses_reference:
        forward += math.ceil(rows / world / config.ref.log_prob_micro_batch_size_per_gpu)
    return {"forward_only": forward, "train": train, "syncs": 1}


def run_once(rl: str, launcher: list[str], steps: int, extra: list[str]) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as out:
        command = [
            rl,
            "train",
            *launcher,
            *extra,
            f"trainer.total_training_steps={steps}",
            "trainer.val_before_train=false",
            "trainer.test_freq=-1",
            "trainer.progress_bar=false",
            f"trainer.output_dir={out}",
        ]
        started = time.perf_counter()
        subprocess.run(
            command,
            check=True,
            capture_output=True,
            env={**os.environ, "RAY_AUTH_MODE": "disabled"},
        )
        wall = time.perf_counter() - started
        rows = [json.loads(line) for line in (Path(out) / "metrics.jsonl").read_text().splitlines()]
    timed = [r for r in rows if "timing/step" in r][2:]
    keys = sorted({k for r in timed for k in r if k.startswith("timing/")})
    result = {k: statistics.median(r[k] for r in timed if k in r) for k in keys}
    result["wall_s"] = wall
    return result


def machine() -> dict[str, Any]:
    """Where it ran: CPU model and count, then the harness header (date, python, torch, ray)."""
    from rl.core.machine import cpu_model
    from rl.kernels.bench.harness import header

    return {"cpu": cpu_model(), "cpus": os.cpu_count(), **header("cpu", ["ray"])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--extra", nargs="*", default=[])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    rl = str(Path(sys.executable).with_name("rl"))
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in LAUNCHERS}
    for _ in range(args.repeats):  # interleaved: drift on a noisy machine hits both alike
        for name, launcher in LAUNCHERS.items():
            runs[name].append(run_once(rl, launcher, args.steps, args.extra))
    summary = {
        name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in runs.items()
    }
    ratio = summary["ray_2ranks"]["timing/step"] / summary["local_1rank"]["timing/step"]

    from rl.core.config import load_config
    from rl.core.demo import DEMO_CONFIG
    from rl.core.models import load_causal_lm, load_tokenizer

    config = load_config(DEMO_CONFIG, args.extra)
    params = sum(
        p.numel() for p in load_causal_lm(config.model, load_tokenizer(config.model)).parameters()
    )
    comm = {
        f"{world}_ranks": comm_model(params, world, 4, demo_passes(config, world))
        for world in (1, 2)
    }
    report = {
        "machine": machine(),
        "runs": runs,
        "median": summary,
        "step_ratio_2_over_1": ratio,
        "params": params,
        "comm_per_rank_per_step": comm,
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{time.strftime('%Y-%m-%d')}_scaling.json").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
