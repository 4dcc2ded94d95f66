"""Shared prompts (`actor.use_prefix_grouper`) against unshared packing, side by side in one
process: an update (`train_step`: forward, backward, AdamW) and a reference forward
(`compute_logprobs`) of the FSDP engine on the same GRPO batch.

    python -m rl.fsdp.bench.prefix_grouper                    # the GRPO benchmark's shape
    python -m rl.fsdp.bench.prefix_grouper --prompt-tokens 64 --response-tokens 32 --n 8

Workload: the demo's tiny Qwen2 (random init), `--prompts` prompts of `--prompt-tokens`
random tokens (0: the demo's arithmetic prompts, ~5 tokens), `--n` responses each, of
random lengths up to `--response-tokens`; one micro-batch of all rows. Two engines from the
same weights, one sharing prompts and one not; each round times both, alternating which
goes first. The update's loss is the token-mean negative log-likelihood (the forward and
backward are what differ). Reports the median seconds of each and the ratio shared /
unshared. Raw rows go to `--out` (jsonl); `benchmarks/prefix_grouper/` keeps committed
output.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from rl.kernels.bench.harness import alternating, elapsed, write_jsonl


def grpo_batch(args: argparse.Namespace, tokenizer: object) -> dict[str, torch.Tensor]:
    from rl.core.demo.arithmetic import arithmetic_rows
    from rl.core.engines import Rollouts
    from rl.core.trainer.rollout_batch import build_batch

    generator = torch.Generator().manual_seed(0)
    vocab = len(tokenizer)  # type: ignore[arg-type]
    if args.prompt_tokens:
        prompts = [
            torch.randint(3, vocab, (args.prompt_tokens,), generator=generator).tolist()
            for _ in range(args.prompts)
        ]
    else:
        rows = arithmetic_rows(args.prompts, 0)
        prompts = [tokenizer(row["prompt"]).input_ids for row in rows]  # type: ignore[operator]
    lengths = torch.randint(
        1, args.response_tokens + 1, (args.prompts * args.n,), generator=generator
    )
    responses = [torch.randint(3, vocab, (int(n),), generator=generator).tolist() for n in lengths]
    rollouts = Rollouts(
        [p for p in prompts for _ in range(args.n)], responses, [[0.0] * len(r) for r in responses]
    )
    return build_batch(rollouts, tokenizer.pad_token_id, args.response_tokens)  # type: ignore[attr-defined]


def nll(output, micro, mini):  # type: ignore[no-untyped-def]
    mask = micro["response_mask"]
    return -(output.logprobs * mask).sum() / mini["response_mask"].sum(), {}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m rl.fsdp.bench.prefix_grouper", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--prompt-tokens", type=int, default=0)
    parser.add_argument("--response-tokens", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default="outputs/bench_prefix_grouper.jsonl")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    from rl.core.config import OptimConfig, load_config
    from rl.core.distributed import ensure_process_group
    from rl.core.machine import cpu_model
    from rl.core.micro_batches import MicroBatching
    from rl.core.models import load_causal_lm, load_tokenizer
    from rl.fsdp.engine import FSDPTrainEngine
    from rl.fsdp.packing import shared_prompt_fraction

    ensure_process_group("cpu")
    config = load_config()
    tokenizer = load_tokenizer(config.model)
    batch = grpo_batch(args, tokenizer)
    rows = batch["responses"].shape[0]
    engines = {
        name: FSDPTrainEngine(
            load_causal_lm(config.model, tokenizer, seed=0),
            "actor",
            optim=OptimConfig(lr=1e-4),
            mini_batch_size=rows,
            train_batching=MicroBatching(rows=rows),
            use_prefix_grouper=share,
        )
        for name, share in (("shared", True), ("unshared", False))
    }
    times: dict[str, dict[str, list[float]]] = {
        name: {"train_step": [], "compute_logprobs": []} for name in engines
    }

    for round_ in range(args.rounds + 2):  # the first two warm up
        for name in alternating(engines, round_):
            engine = engines[name]
            step = elapsed(lambda: engine.train_step(batch, nll))  # noqa: B023
            forward = elapsed(lambda: engine.compute_logprobs(batch))  # noqa: B023
            if round_ >= 2:
                times[name]["train_step"].append(step)
                times[name]["compute_logprobs"].append(forward)

    write_jsonl(Path(args.out), ({"engine": name, **phases} for name, phases in times.items()))
    tokens = int(batch["attention_mask"].sum())
    print(
        f"# bench_prefix_grouper: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
        f"{cpu_model()}; torch {torch.__version__}; {args.threads} threads"
    )
    print(
        f"# {args.prompts} prompts x {args.n} responses; prompt tokens "
        f"{args.prompt_tokens or 'arithmetic'}; responses <= {args.response_tokens} tokens; "
        f"{tokens} real tokens, {shared_prompt_fraction(batch):.0%} of them repeated prompts; "
        f"{args.rounds} rounds"
    )
    for phase in ("train_step", "compute_logprobs"):
        shared = statistics.median(times["shared"][phase])
        unshared = statistics.median(times["unshared"][phase])
        print(
            f"{phase}: shared {shared * 1e3:.2f} ms, unshared {unshared * 1e3:.2f} ms, "
            f"ratio {shared / unshared:.2f}"
        )


if __name__ == "__main__":
    main()
