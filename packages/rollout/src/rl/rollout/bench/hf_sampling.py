"""The HF rollout engine's sampling loop (`rl.rollout.hf_sampling.sample`) against
transformers' `generate` drawing the same tokens, side by side in one process.

    python -m rl.rollout.bench.hf_sampling                 # 60 rounds
    python -m rl.rollout.bench.hf_sampling --rounds 100 --prompts 16 --n 8

Workload: the demo's tiny Qwen2 (random init) and `--prompts` built-in arithmetic prompts,
`--n` responses each of at most `--new-tokens` tokens at temperature 1 (no top-k/top-p),
the GRPO benchmark's rollout. Each round runs both from the same seed (the tokens are
checked equal), alternating which goes first; the loop runs twice, with its decode step
(`rl.rollout.decode_step`) and with every decode step through `model(...)`. Reports the
median seconds per call of each, the ratio loop / generate and the decode step's saving
(loop / loop through `model(...)`). Raw rows go to `--out` (jsonl); `benchmarks/hf_sampling/`
keeps committed output.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from rl.kernels.bench.harness import alternating, append_jsonl


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m rl.rollout.bench.hf_sampling", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default="outputs/bench_hf_sampling.jsonl")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    import transformers
    from transformers import GenerationConfig

    from rl.core.config import load_config
    from rl.core.demo.arithmetic import arithmetic_rows
    from rl.core.engines import SamplingParams
    from rl.core.machine import cpu_model
    from rl.core.models import load_causal_lm, load_tokenizer
    from rl.rollout.hf import left_pad
    from rl.rollout.hf_sampling import sample

    config = load_config()
    tokenizer = load_tokenizer(config.model)
    model = load_causal_lm(config.model, tokenizer, seed=0).eval()
    prompts = [tokenizer(row["prompt"]).input_ids for row in arithmetic_rows(args.prompts, 0)]
    ids, mask = left_pad(prompts, tokenizer.pad_token_id)
    sampling = SamplingParams(n=args.n, max_new_tokens=args.new_tokens)
    stop_ids = [tokenizer.eos_token_id]
    generation_config = GenerationConfig(
        do_sample=True,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        max_new_tokens=args.new_tokens,
        eos_token_id=stop_ids,
        pad_token_id=tokenizer.pad_token_id,
        output_logits=True,
        return_dict_in_generate=True,
    )

    def with_generate(seed: int) -> torch.Tensor:
        torch.manual_seed(seed)
        output = model.generate(
            input_ids=ids.repeat_interleave(args.n, 0),
            attention_mask=mask.repeat_interleave(args.n, 0),
            generation_config=generation_config,
        )
        return output.sequences[:, ids.shape[1] :]

    def with_loop(seed: int, decode_step: bool = True) -> torch.Tensor:
        torch.manual_seed(seed)
        pad = tokenizer.pad_token_id
        return sample(model, ids, mask, sampling, pad, stop_ids, decode_step=decode_step)[0]

    sides = {
        "generate": with_generate,
        "loop": with_loop,
        "loop_model_forward": lambda seed: with_loop(seed, decode_step=False),
    }
    times: dict[str, list[float]] = {name: [] for name in sides}
    with torch.inference_mode():
        for seed in range(3):  # warm-up
            want = with_generate(seed)
            for name in ("loop", "loop_model_forward"):
                assert torch.equal(want, sides[name](seed)), f"{name}: the tokens differ"
        for round_ in range(args.rounds):
            tokens = {}
            for name in alternating(sides, round_):
                started = time.perf_counter()
                tokens[name] = sides[name](100 + round_)
                times[name].append(time.perf_counter() - started)
            for name in ("loop", "loop_model_forward"):
                same = torch.equal(tokens["generate"], tokens[name])
                assert same, f"round {round_}: {name}'s tokens differ"

    medians = {name: statistics.median(values) for name, values in times.items()}
    ratio = medians["loop"] / medians["generate"]
    decode_ratio = medians["loop"] / medians["loop_model_forward"]
    print(
        f"rows {args.prompts} x {args.n}, <= {args.new_tokens} tokens, {args.threads} threads, "
        f"{args.rounds} rounds, torch {torch.__version__}, transformers "
        f"{transformers.__version__}, {cpu_model()}"
    )
    for name, value in medians.items():
        print(f"{name:>18}: median {value * 1e3:.2f} ms per call")
    print(f"loop / generate: {ratio:.3f}")
    print(f"decode step / model(...) (the loop with each): {decode_ratio:.3f}")
    row = {"args": vars(args), "times": times, "ratio": ratio, "decode_ratio": decode_ratio}
    append_jsonl(Path(args.out), [row])


if __name__ == "__main__":
    main()
