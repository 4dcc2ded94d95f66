"""The FSDP engine at one rank: FSDP2-wrapped (DTensor parameters, torch's default AdamW)
against the plain model it now keeps there (fused AdamW), side by side in one process.

    python -m rl.fsdp.bench.one_rank              # 30 rounds
    python -m rl.fsdp.bench.one_rank --rounds 60 --rows 64

Workload: the demo's tiny Qwen2 (random init), `--rows` rows of 8 prompt + 8 response
tokens, an actor update (one mini-batch, the PPO loss with constant advantages) and a
forward-only log-prob pass, as one GRPO step of the demo does. Each round times both
engines, alternating which goes first (drifts of this noisy machine hit both). Reports the
median time of `train_step` and of `compute_logprobs` for each and the ratio plain /
wrapped. Raw rows go to `--out` (jsonl); `benchmarks/fsdp_one_rank/` keeps committed output.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

import torch

from rl.kernels.bench.harness import alternating, write_jsonl


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m rl.fsdp.bench.one_rank", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--out", default="outputs/bench_fsdp_one_rank.jsonl")
    args = parser.parse_args(argv)

    import rl.fsdp.wrap
    from rl.core.config import OptimConfig, load_config
    from rl.core.engines import Rollouts
    from rl.core.models import load_causal_lm, load_tokenizer
    from rl.core.trainer.algorithm_setup import actor_loss_fn
    from rl.core.trainer.rollout_batch import build_batch
    from rl.fsdp.engine import FSDPTrainEngine

    config = load_config(overrides=["actor.use_fused_kernels=false"])
    tokenizer = load_tokenizer(config.model)
    generator = torch.Generator().manual_seed(0)
    prompts = [torch.randint(3, len(tokenizer), (8,), generator=generator).tolist()] * args.rows
    responses = [torch.randint(3, len(tokenizer), (8,), generator=generator).tolist()] * args.rows
    batch = build_batch(Rollouts(prompts, responses, [[0.0] * 8] * args.rows), 0, 8)
    batch["old_logprobs"] = torch.full(batch["response_mask"].shape, -3.0)
    batch["advantages"] = torch.randn(args.rows, 1, generator=generator).expand(-1, 8).clone()
    loss = actor_loss_fn(config)

    def engine(wrapped: bool) -> FSDPTrainEngine:
        original = rl.fsdp.wrap.needs_fsdp
        if wrapped:
            rl.fsdp.wrap.needs_fsdp = lambda mesh, fsdp: True  # type: ignore[assignment]
        try:
            return FSDPTrainEngine(
                load_causal_lm(config.model, tokenizer, seed=1),
                "actor",
                optim=OptimConfig(lr=1e-4),
                mini_batch_size=args.rows,
                micro_batch_size=args.rows,
            )
        finally:
            rl.fsdp.wrap.needs_fsdp = original

    engines = {"fsdp2_wrapped": engine(True), "plain": engine(False)}
    rows = []
    for round_ in range(args.rounds + 2):  # two warm-up rounds, not reported
        for name in alternating(engines, round_):
            started = time.perf_counter()
            engines[name].train_step(batch, loss)
            trained = time.perf_counter()
            engines[name].compute_logprobs(batch)
            done = time.perf_counter()
            if round_ >= 2:
                rows.append(
                    {
                        "round": round_ - 2,
                        "engine": name,
                        "train_step_s": trained - started,
                        "compute_logprobs_s": done - trained,
                    }
                )
    write_jsonl(Path(args.out), rows)

    def median(name: str, key: str) -> float:
        return statistics.median(r[key] for r in rows if r["engine"] == name)

    print(
        f"{platform.processor() or platform.machine()}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, {args.rows} rows x 16 tokens, {args.rounds} rounds"
    )
    for key in ("train_step_s", "compute_logprobs_s"):
        wrapped, plain = median("fsdp2_wrapped", key), median("plain", key)
        print(
            f"{key:20s} wrapped {wrapped * 1000:8.2f} ms   plain {plain * 1000:8.2f} ms   "
            f"plain/wrapped {plain / wrapped:.2f}"
        )


if __name__ == "__main__":
    main()
