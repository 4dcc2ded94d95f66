"""Benchmark of weight resharding: a 7B-shaped bf16 parameter set, packed into
one-dtype buckets and delivered into a receiver's parameters, per bucket size.

The shape LIST is Llama-2-7B's or Qwen2-7B's (q/k/v/o, gate/up/down, norms,
biases, embedding, head), scaled to fit: `--layers` of the model's decoder
layers and every width (hidden, intermediate, vocab) times `--width-scale`.
Source and receiver parameters are views into two flat buffers, so the
hardware reference, a plain `copy_` of the same bytes, runs on the very same
memory. Repetitions are interleaved (copy, then each bucket size) and the
median is reported.

Stages, per bucket size:
- `pack`: plan (`group_stream`) + a fresh bucket per group + `pack_into`,
  what a transport's sender does; moves 2N bytes (read + write) like copy_.
- `pack+deliver`: the same, then `unpack_bucket_into` the receiver's
  parameters: two copies, 4N bytes moved; compared with two copy_'s.
rl.core's delta check (`ContentFingerprints`) is timed on the same parameter set
by `python -m rl.core.bench.reshard`, which adds its row to this benchmark's:
rl-kernels depends on nothing of ours.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from pathlib import Path

import torch

from rl.kernels.bench.harness import elapsed, environment_tags, report
from rl.kernels.bucket_plan import group_stream
from rl.kernels.buckets import BucketPool, pack_into, unpack_bucket_into

MODELS = {
    # hidden, intermediate, layers, vocab, kv_dim, qkv bias
    "llama2-7b": (4096, 11008, 32, 32000, 4096, False),
    "qwen2-7b": (3584, 18944, 28, 152064, 512, True),
}
BUCKET_MB = (64, 256, 1024, 2048)


def model_shapes(model: str, layers: int, scale: float) -> list[tuple[str, tuple[int, ...]]]:
    """HF names and shapes of `model` with `layers` decoder layers, widths times `scale`."""
    hidden, inter, _, vocab, kv, bias = MODELS[model]
    h, i, v, k = (max(int(x * scale), 1) for x in (hidden, inter, vocab, kv))
    shapes = [("model.embed_tokens.weight", (v, h))]
    for n in range(layers):
        p = f"model.layers.{n}."
        shapes += [(p + "input_layernorm.weight", (h,))]
        for proj, rows in (("q", h), ("k", k), ("v", k)):
            shapes.append((f"{p}self_attn.{proj}_proj.weight", (rows, h)))
            if bias:
                shapes.append((f"{p}self_attn.{proj}_proj.bias", (rows,)))
        shapes += [
            (p + "self_attn.o_proj.weight", (h, h)),
            (p + "post_attention_layernorm.weight", (h,)),
            (p + "mlp.gate_proj.weight", (i, h)),
            (p + "mlp.up_proj.weight", (i, h)),
            (p + "mlp.down_proj.weight", (h, i)),
        ]
    return [*shapes, ("model.norm.weight", (h,)), ("lm_head.weight", (v, h))]


def views_into(flat: torch.Tensor, shapes: list[tuple[str, tuple[int, ...]]]):
    """Named views of consecutive slices of `flat`, one per shape."""
    named, cursor = [], 0
    for name, shape in shapes:
        numel = 1
        for size in shape:
            numel *= size
        named.append((name, flat.narrow(0, cursor, numel).view(shape)))
        cursor += numel
    return named


def reshard(source, receiver, bucket_bytes: int, deliver: bool, pool: BucketPool) -> int:
    """Pack `source` into buckets (and unpack into `receiver`); returns the bucket count.

    Buckets come from `pool` as in rl.core's sender: recycled once unused.
    """
    targets = dict(receiver)
    count = 0
    meta = lambda item: (item[0], item[1].shape, item[1].dtype)  # noqa: E731
    for group in group_stream(source, meta, bucket_bytes):
        layout = group.layout
        bucket = pool.take(layout.numel, layout.dtype, group.items[0][1].device, bucket_bytes)
        pack_into(bucket, layout, [tensor for _, tensor in group.items])
        if deliver:
            unpack_bucket_into(bucket, layout, [targets[name] for name, _ in group.items])
        count += 1
    return count


# (source [(name, tensor)], tags, weight bytes) -> more rows, timed on the same tensors
ExtraStages = Callable[[list, dict, int], list[dict]]


def run(args: argparse.Namespace, extra_stages: ExtraStages | None = None) -> list[dict]:
    device = torch.device(args.device)
    shapes = model_shapes(args.model, args.layers, args.width_scale)
    numel = sum(_numel(shape) for _, shape in shapes)
    weight_bytes = numel * torch.bfloat16.itemsize
    source_flat = torch.randn(numel, device=device).to(torch.bfloat16)
    receiver_flat = torch.empty_like(source_flat)
    source, receiver = views_into(source_flat, shapes), views_into(receiver_flat, shapes)
    sizes = sorted({min(mb << 20, weight_bytes) for mb in args.bucket_mb})
    print(
        f"{args.model}: {args.layers} of {MODELS[args.model][2]} layers, widths x "
        f"{args.width_scale}: {len(shapes)} tensors, {weight_bytes / 2**20:.0f} MiB bf16; "
        f"bucket sizes (clipped to the model) MiB: {[s >> 20 for s in sizes]}; "
        f"{torch.get_num_threads()} threads"
    )
    pool = BucketPool(max_cached_bytes=args.pool_mb << 20)
    cases = {"copy": lambda: receiver_flat.copy_(source_flat)}
    for size in sizes:
        cases[f"pack@{size}"] = lambda s=size: reshard(source, receiver, s, False, pool)
        cases[f"pack+deliver@{size}"] = lambda s=size: reshard(source, receiver, s, True, pool)
    for fn in cases.values():  # warm-up
        fn()
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeats):  # interleaved: drifts of a shared machine hit all alike
        for name, fn in cases.items():
            samples[name].append(elapsed(fn, device))
    assert torch.equal(receiver_flat, source_flat)
    median = {name: statistics.median(values) for name, values in samples.items()}
    tags = {**environment_tags(device), "model": args.model, "layers": args.layers}
    tags |= {"width_scale": args.width_scale, "weight_mb": round(weight_bytes / 2**20, 1)}
    rows = [row(tags, "copy", 0, 1, 2 * weight_bytes, median["copy"], median["copy"])]
    for size in sizes:
        buckets = reshard(source, receiver, size, False, pool)
        pack, deliver = median[f"pack@{size}"], median[f"pack+deliver@{size}"]
        rows.append(row(tags, "pack", size, buckets, 2 * weight_bytes, pack, median["copy"]))
        rows.append(
            row(tags, "pack+deliver", size, buckets, 4 * weight_bytes, deliver, 2 * median["copy"])
        )
    if extra_stages is not None:
        rows += extra_stages(source, tags, weight_bytes)
    return rows


def row(tags, stage, bucket_bytes, buckets, moved, seconds, reference) -> dict:
    return {
        **tags,
        "op": "reshard",
        "stage": stage,
        "bucket_mb": bucket_bytes >> 20,
        "buckets": buckets,
        "moved_mb": round(moved / 2**20, 1),
        "median_ms": seconds * 1e3,
        "gb_per_s": moved / seconds / 1e9,
        "pct_of_copy": 100.0 * reference / seconds if reference else "",
    }


def _numel(shape: tuple[int, ...]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


def make_parser(prog: str = "python -m rl.kernels.bench reshard") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--model", choices=MODELS, default="llama2-7b")
    parser.add_argument("--layers", type=int, default=6, help="decoder layers kept")
    parser.add_argument("--pool-mb", type=int, default=1536, help="BucketPool cache cap")
    parser.add_argument("--width-scale", type=float, default=0.5)
    parser.add_argument("--bucket-mb", type=int, nargs="+", default=list(BUCKET_MB))
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--csv", type=Path, default=Path("benchmarks/results/reshard.csv"))
    return parser


def main(
    argv: list[str] | None = None,
    extra_stages: ExtraStages | None = None,
    prog: str = "python -m rl.kernels.bench reshard",
) -> int:
    args = make_parser(prog).parse_args(argv)
    rows = run(args, extra_stages)
    columns = ["device", "stage", "bucket_mb", "buckets", "moved_mb", "median_ms", "gb_per_s"]
    report(rows, [*columns, "pct_of_copy"], args.csv)
    return 0
