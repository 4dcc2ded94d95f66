"""`python -m rl.bench weight-sync`: a weight sync at a real shape against a plain copy.

    python -m rl.bench weight-sync --shape qwen2.5-0.5b --layers 4 --repeats 5

One model folder of `rl.bench grpo-step`'s real-shape workload (built once under `--out`)
is loaded as the trainer's weights, fp32. Each carrier then moves every weight into an HF
rollout engine of the same folder, `--repeats` times, and the report gives the median
seconds of a sync, its bytes per second, and its ratio to the floor: one `copy_` of the
same tensors into tensors allocated beforehand, in this process.

- in-process, shared: `share_weights` (the colocated HF rollout's path: the rollout takes
  the trainer's tensors, no byte moves);
- in-process, copied: `WeightSender` with the in-process transport into
  `update_weights` (a colocated engine that cannot share: another dtype, a vLLM engine),
  the offered tensors handed as they are (the workers' colocated sync) and packed into
  buckets first (the transport's default, as the carriers across processes do);
- across processes: `WeightSender` with the gloo broadcast transport (`BroadcastSender`)
  to a receiving process that loads the buckets into its engine (`BroadcastReceiver`),
  over a weight group of its own (`open_weight_group`), as a disaggregated placement's
  push does; timed from the sender's start to the receiver's last weight loaded.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from rl.bench import shape_workload as sw
from rl.core.distributed import free_port
from rl.kernels.bench.harness import elapsed


def load_engine(model_dir: Path) -> Any:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rl.rollout.hf import HFRolloutEngine

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    return HFRolloutEngine(model, AutoTokenizer.from_pretrained(model_dir))


def trainer_weights(model_dir: Path) -> list[tuple[str, torch.Tensor]]:
    """The weights as a trainer exports them after an update: each tensor once, with its
    own storage, every value moved off the folder's (x 1.001), so a sync that did not
    arrive shows in the checksum."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    return [(name, p.detach().clone().mul_(1.001)) for name, p in model.named_parameters()]


def receiver(model_dir: str, port: int, repeats: int, done: Any, threads: int) -> None:
    """The receiving process: its engine, the weight group, `repeats` syncs; each sync's
    end (time.monotonic, one clock for the processes of a machine) back through `done`."""
    torch.set_num_threads(threads)
    from rl.core.weight_sync.broadcast import BroadcastReceiver
    from rl.core.weight_sync.channel import open_weight_group

    engine = load_engine(Path(model_dir))
    group = open_weight_group("127.0.0.1", port, 1, 2)
    receive = BroadcastReceiver(0, group)
    for _ in range(repeats):
        receive.receive(engine)
        done.send(time.monotonic())
    done.send(checksum(engine.model.named_parameters()))


def checksum(named: Any) -> float:
    """Every weight's float64 sum of squares, added up: equal on both sides after a sync."""
    from rl.core.norms import square_sum

    return float(sum(square_sum(t) for _, t in named))


def median_s(run: Any, repeats: int) -> float:
    return statistics.median(elapsed(run) for _ in range(repeats))


def across_processes(model_dir: Path, weights: list, repeats: int, threads: int) -> float:
    from rl.core.weight_sync.broadcast import BroadcastSender
    from rl.core.weight_sync.channel import open_weight_group
    from rl.core.weight_sync.sender import WeightSender

    port = free_port()
    spawn = mp.get_context("spawn")
    ours, theirs = spawn.Pipe()
    child = spawn.Process(target=receiver, args=(str(model_dir), port, repeats, theirs, threads))
    child.start()
    try:
        group = open_weight_group("127.0.0.1", port, 0, 2)
        sender = WeightSender(transport=BroadcastSender(0, group))
        samples = []
        for _ in range(repeats):
            start = time.monotonic()
            sender.sync(weights)
            samples.append(ours.recv() - start)
        received, sent = ours.recv(), checksum(weights)
        if received != sent:
            raise SystemExit(f"the receiver's weights differ: checksum {received} != {sent}")
        child.join(timeout=60)
    finally:
        if child.is_alive():
            child.kill()
    return statistics.median(samples)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m rl.bench weight-sync", description=__doc__)
    parser.add_argument("--shape", choices=sw.SHAPES, default="qwen2.5-0.5b")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("outputs/bench_weight_sync"))
    parser.add_argument("--model", type=Path, help="a model folder to use instead of --shape's")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    from rl.core.machine import cpu_model
    from rl.core.models import build_model_folder
    from rl.core.weight_sync.sender import WeightSender
    from rl.core.weight_sync.transports import InProcessTransport

    model_dir = args.model or args.out / f"{args.shape}-{args.layers}l" / "model"
    if not (model_dir / "config.json").is_file():
        build_model_folder(args.shape, model_dir, num_layers=args.layers, seed=1)
    weights = trainer_weights(model_dir)
    total = sum(t.numel() * t.element_size() for _, t in weights)
    floor_targets = [torch.empty_like(t) for _, t in weights]
    for target, (_, t) in zip(floor_targets, weights, strict=True):
        target.copy_(t)  # touched once, as a loaded engine's weights are

    def floor() -> None:
        for target, (_, t) in zip(floor_targets, weights, strict=True):
            target.copy_(t)

    rows = [("a plain copy_ of the same tensors (the floor)", median_s(floor, args.repeats))]
    engine = load_engine(model_dir)
    direct = WeightSender(transport=InProcessTransport(pack=False))
    rows.append(
        ("in-process, copied: WeightSender (tensors as offered) -> update_weights",
         median_s(lambda: direct.sync(weights, engine), args.repeats))
    )  # fmt: skip
    packed = WeightSender()
    rows.append(
        ("in-process, copied: WeightSender (256 MiB buckets) -> update_weights",
         median_s(lambda: packed.sync(weights, engine), args.repeats))
    )  # fmt: skip
    shared = load_engine(model_dir)
    start = time.perf_counter()
    assert shared.share_weights(weights), "the engine did not take the trainer's tensors"
    rows.append(("in-process, shared: share_weights (no byte moves)", time.perf_counter() - start))
    if checksum(engine.model.named_parameters()) != checksum(weights):
        raise SystemExit("the in-process copy differs from the trainer's weights")
    engine = shared = None  # their memory back before the receiving process loads its own
    rows.append(
        ("across processes: gloo broadcast -> update_weights",
         across_processes(model_dir, weights, args.repeats, args.threads))
    )  # fmt: skip
    print(f"# rl.bench weight-sync, {time.strftime('%Y-%m-%d %H:%M %Z')}")
    print(
        f"# machine: {cpu_model()}, {os.cpu_count()} cores; {args.threads} threads; "
        f"python {sys.version.split()[0]}, torch {torch.__version__}"
    )
    print(
        f"# weights: {args.model or f'{args.shape} shape, {args.layers} layers'}, fp32, "
        f"{len(weights)} tensors, "
        f"{total / 2**20:.0f} MiB; median of {args.repeats} syncs (shared: one)"
    )
    print("")
    print("| carrier | seconds a sync | GB/s | ratio to the floor |")
    print("|---|---|---|---|")
    base = rows[0][1]
    for name, seconds in rows:
        rate = total / seconds / 1e9 if seconds > 0 else float("inf")
        print(f"| {name} | {seconds:.4f} | {rate:.2f} | {seconds / base:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
