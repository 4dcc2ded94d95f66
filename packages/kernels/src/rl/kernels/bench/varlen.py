"""`python -m rl.kernels.bench varlen`: one training step, packed vs padded, side by side.

A Qwen2-shaped model with random weights (about 7M parameters by default, so it runs on
a laptop CPU; pass a bigger shape on a GPU) takes one step — forward, backward, AdamW —
on a batch of prompts with responses whose lengths are (a) log-normal capped at the
maximum, the long tail of RL, or (b) all equal. Variants:

- `padded`: every row padded to the longest, one micro-batch (today's default elsewhere);
- `packed`: the real tokens in one row, attention within each sequence (`rl_varlen`);
- `packed-rows` / `packed-budget`: packed micro-batches of a fixed row count vs by token budget
  (`rl.kernels.token_budget_partition`) — time and peak memory.

Each variant runs in its own process (peak RSS is per process on CPU; `max_memory_allocated`
on GPU), variants interleaved round by round; medians and ratios are printed and appended
to a CSV with the device and versions.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

from rl.kernels.bench.harness import append_csv, environment_tags, print_table

VARIANTS = ("padded", "packed", "packed-rows", "packed-budget")


def response_lengths(kind: str, rows: int, max_len: int, seed: int) -> list[int]:
    generator = torch.Generator().manual_seed(seed)
    if kind == "equal":
        return [max_len] * rows
    # log-normal with median max_len / 6: most responses short, a few at the cap
    draws = torch.empty(rows).log_normal_(math.log(max_len / 6), 1.0, generator=generator)
    return [int(min(max(1, round(x)), max_len)) for x in draws.tolist()]


def build_model(shape: dict[str, int], device: torch.device) -> Any:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from rl.kernels.varlen_attention import register

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=shape["vocab"],
        hidden_size=shape["hidden"],
        intermediate_size=shape["hidden"] * 3,
        num_hidden_layers=shape["layers"],
        num_attention_heads=shape["hidden"] // 64,
        num_key_value_heads=max(1, shape["hidden"] // 256),
        tie_word_embeddings=False,
    )
    model = Qwen2ForCausalLM(config).to(device)
    register()
    return model


def make_rows(lengths: list[int], prompt_len: int, vocab: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return [torch.randint(3, vocab, (prompt_len + n,), generator=generator) for n in lengths]


def right_padded(rows: list[torch.Tensor], device: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, attention mask) [B, L_max] of `rows`, right-padded: the batch both variants take."""
    width = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)], mask[i, : len(row)] = row, 1
    return ids.to(device), mask.to(device)


def padded_step(model: Any, rows: list[torch.Tensor], prompt_len: int, device: Any) -> Any:
    ids, mask = right_padded(rows, device)
    model.set_attn_implementation("sdpa")
    logits = model(input_ids=ids, attention_mask=mask, use_cache=False).logits[:, :-1]
    labels = ids[:, 1:].masked_fill(mask[:, 1:] == 0, -100)
    labels[:, : prompt_len - 1] = -100
    return torch.nn.functional.cross_entropy(
        logits.float().flatten(0, 1), labels.flatten(), reduction="sum"
    )


def packed_step(model: Any, rows: list[torch.Tensor], prompt_len: int, device: Any) -> Any:
    from rl.kernels import packed_labels, packed_layout, packed_position_ids, unpad

    ids, mask = right_padded(rows, device)
    layout = packed_layout(mask)
    packed = unpad(ids, layout)
    positions = packed_position_ids(layout)
    labels = packed_labels(packed, layout).masked_fill(positions < prompt_len - 1, -100)
    model.set_attn_implementation("rl_varlen")
    logits = model(
        input_ids=packed[None],
        position_ids=positions[None],
        cu_seq_lens_q=layout.cu_seqlens,
        cu_seq_lens_k=layout.cu_seqlens,
        max_length_q=layout.max_seqlen,
        max_length_k=layout.max_seqlen,
        use_cache=False,
    ).logits[0]
    return torch.nn.functional.cross_entropy(logits.float(), labels, reduction="sum")


def run_variant(variant: str, args: argparse.Namespace, kind: str) -> dict[str, float]:
    """One variant in this process: median step time (ms) and peak memory (MB)."""
    device = torch.device(args.device)
    shape = {"vocab": args.vocab, "hidden": args.hidden, "layers": args.layers}
    model = build_model(shape, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    lengths = response_lengths(kind, args.rows, args.max_len, args.seed)
    rows = make_rows(lengths, args.prompt_len, args.vocab)
    step = packed_step if variant.startswith("packed") else padded_step
    if variant == "packed-budget":
        from rl.kernels import token_budget_partition

        budget = args.token_budget or args.prompt_len + args.max_len
        groups = token_budget_partition([len(r) for r in rows], budget, key="--token-budget")
    elif variant == "packed-rows":
        groups = [
            list(range(i, min(i + args.micro_rows, len(rows))))
            for i in range(0, len(rows), args.micro_rows)
        ]
    else:
        groups = [list(range(len(rows)))]
    baseline_rss = _peak_rss_mb()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    for _ in range(args.warmup + args.repeats):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        for group in groups:
            step(model, [rows[i] for i in group], args.prompt_len, device).backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append((time.perf_counter() - start) * 1e3)
    times = sorted(times[args.warmup :])
    peak = (
        torch.cuda.max_memory_allocated(device) / 2**20
        if device.type == "cuda"
        else _peak_rss_mb() - baseline_rss
    )
    return {
        "median_ms": times[len(times) // 2],
        "peak_mb": peak,
        "tokens": sum(len(r) for r in rows),
        "padded_tokens": len(rows) * max(len(r) for r in rows),
        "micro_batches": len(groups),
    }


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m rl.kernels.bench varlen")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--prompt-len", type=int, default=64)
    parser.add_argument("--max-len", type=int, default=448, help="longest response")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--micro-rows", type=int, default=4)
    parser.add_argument("--token-budget", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds per variant")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--csv", type=Path, default=None)
    parser.add_argument("--child", nargs=2, metavar=("VARIANT", "KIND"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    if args.child:
        print(json.dumps(run_variant(args.child[0], args, args.child[1])))
        return 0
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    cases = [("lognormal", v) for v in VARIANTS] + [("equal", "padded"), ("equal", "packed")]
    for _ in range(args.rounds):
        for kind, variant in cases:  # interleaved, each in a fresh process
            command = [sys.executable, "-m", "rl.kernels.bench", "varlen", *argv]
            command += ["--child", variant, kind]
            out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
            results.setdefault((kind, variant), []).append(json.loads(out.splitlines()[-1]))
    table = []
    tags = environment_tags(torch.device(args.device))
    for (kind, variant), runs in results.items():
        runs.sort(key=lambda r: r["median_ms"])
        best = runs[len(runs) // 2]
        table.append({"lengths": kind, "variant": variant, **best, **tags})
    by = {(r["lengths"], r["variant"]): r for r in table}
    for row in table:
        base = by[(row["lengths"], "padded")]
        row["speedup_vs_padded"] = base["median_ms"] / row["median_ms"]
        row["memory_vs_padded"] = row["peak_mb"] / max(base["peak_mb"], 1e-9)
    print_table(
        table,
        [
            "lengths",
            "variant",
            "tokens",
            "padded_tokens",
            "micro_batches",
            "median_ms",
            "peak_mb",
            "speedup_vs_padded",
            "memory_vs_padded",
        ],
    )
    if args.csv:
        append_csv(args.csv, table)
    return 0
