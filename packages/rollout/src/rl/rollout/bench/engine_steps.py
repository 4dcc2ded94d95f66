"""The measurements behind `python -m rl.rollout.bench`: one process, both engines.

`build` loads the trainer's weights (state A) and a second set (state B, another
seed), puts A into the HF engine and into a running vLLM engine, and records
the greedy output of vLLM on A and on B as the correctness references.
`measure_rollout` times `generate` of both engines, interleaved, on the same
prompts and sampling. `measure_weight_sync` times three ways of loading weights
into the running vLLM engine, each repetition switching A <-> B so that every
path really changes the weights, and checks the greedy output after each.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from rl.core.config import load_config
from rl.core.engines import Rollouts, SamplingParams
from rl.core.models import load_causal_lm, load_model_config, load_tokenizer
from rl.core.weight_sync import WeightSender, tied_aliases, without_aliases
from rl.rollout.hf import HFRolloutEngine

# Qwen2-0.5B's shape (head_dim 896 / 14 = 64), with the built-in char vocabulary
QWEN2_05B = (
    "model.tiny.hidden_size=896",
    "model.tiny.num_hidden_layers=24",
    "model.tiny.num_attention_heads=14",
    "model.tiny.num_key_value_heads=2",
    "model.tiny.intermediate_size=4864",
)


@dataclass(frozen=True)
class Settings:
    model: str  # tiny | 0.5b
    dtype: str
    prompts: int
    n: int
    new_tokens: int
    repeats: int
    guard_tokens: int = 8


DEFAULTS = {
    "tiny": Settings("tiny", "float32", prompts=16, n=4, new_tokens=64, repeats=7),
    "0.5b": Settings("0.5b", "bfloat16", prompts=8, n=4, new_tokens=64, repeats=7),
}
PATHS = ("sender.sync", "update_weights", "save+reload")


@dataclass
class Bench:
    settings: Settings
    hf: HFRolloutEngine
    vllm: Any
    states: dict[str, dict[str, torch.Tensor]]
    prompt_ids: list[list[int]]
    folder: str  # config.json + model.safetensors, for vLLM's reload from disk
    bucket_bytes: int
    references: dict[str, Rollouts] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    current: str = "A"  # the state the vLLM engine holds
    sender: WeightSender | None = None  # one per run, as in the trainer

    def guard_prompts(self) -> list[list[int]]:
        return self.prompt_ids[:4]

    def greedy_params(self) -> SamplingParams:
        return SamplingParams(temperature=0.0, max_new_tokens=self.settings.guard_tokens)

    def close(self) -> None:
        self.vllm.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def overrides(settings: Settings) -> list[str]:
    shape = QWEN2_05B if settings.model == "0.5b" else ()
    return [
        "rollout.name=vllm",
        f"rollout.max_num_seqs={max(settings.prompts * settings.n, 8)}",
        "data.max_prompt_length=32",
        f"data.max_response_length={max(settings.new_tokens, settings.guard_tokens)}",
        f"model.dtype={settings.dtype}",
        *shape,
    ]


def make_prompts(tokenizer: Any, count: int) -> list[list[int]]:
    """`count` arithmetic prompts of 4 to 9 characters, the same on every run."""
    ops = "+-*"
    texts = [f"{(7 * i) % 97}{ops[i % 3]}{(13 * i + 5) % 211}=" for i in range(count)]
    return [tokenizer(text).input_ids for text in texts]


def build(settings: Settings) -> Bench:
    from rl.rollout.vllm import VLLMRolloutEngine

    config = load_config(overrides=overrides(settings))
    tokenizer = load_tokenizer(config.model)
    model = load_causal_lm(config.model, tokenizer, seed=1)
    tied = tied_aliases(model)  # a tied tensor once, as the trainer exports it
    state_a = {k: v.detach().clone() for k, v in without_aliases(model.state_dict().items(), tied)}
    other = load_causal_lm(config.model, tokenizer, seed=2).state_dict()
    state_b = {k: v.detach() for k, v in without_aliases(other.items(), tied)}
    hf = HFRolloutEngine(model, tokenizer)
    start = time.perf_counter()
    engine = VLLMRolloutEngine.from_config(config, tokenizer)
    info: dict[str, Any] = {"vllm_startup_s": time.perf_counter() - start}
    folder = tempfile.mkdtemp(prefix="rl-rollout-bench-")
    load_model_config(config.model, tokenizer).save_pretrained(folder)
    bench = Bench(
        settings,
        hf,
        engine,
        {"A": state_a, "B": state_b},
        make_prompts(tokenizer, settings.prompts),
        folder,
        config.rollout.update_weights_bucket_megabytes << 20,
        info=info,
    )
    hf.update_weights(iter(state_a.items()))  # the same state dict into both engines
    for name in ("B", "A"):  # ends on A, the HF engine's weights
        engine.update_weights(iter(bench.states[name].items()))
        bench.references[name] = greedy(bench)
    hf_greedy = hf.generate(bench.guard_prompts(), bench.greedy_params()).response_ids
    info["greedy_vllm_equals_hf"] = hf_greedy == bench.references["A"].response_ids
    info["guard_distinguishes_A_B"] = (
        bench.references["A"].response_ids != bench.references["B"].response_ids
    )
    info["weights_bytes"] = sum(t.numel() * t.element_size() for t in state_a.values())
    info["parameters"] = sum(t.numel() for t in state_a.values())
    info["vocab"] = len(tokenizer)
    return bench


def greedy(bench: Bench) -> Rollouts:
    return bench.vllm.generate(bench.guard_prompts(), bench.greedy_params())


# vLLM's CPU build is not bit-reproducible in bf16: reloading the *same* weights by the
# same path changed greedy log-probs by up to 0.021 (0.5B shape, 30 reloads), which can
# flip a near-tie argmax. fp32 reproduced exactly.
GUARD_TOLERANCE = {"float32": 1e-4, "bfloat16": 0.05, "float16": 0.05}


def matches_reference(output: Rollouts, reference: Rollouts, tolerance: float) -> bool:
    """Greedy output under the loaded weights agrees with the reference's: equal tokens
    with log-probs within `tolerance`, up to a first divergence that must be a near-tie
    (both tokens' log-probs within `tolerance`); after it the contexts differ."""
    rows = zip(
        output.response_ids,
        output.logprobs,
        reference.response_ids,
        reference.logprobs,
        strict=True,
    )
    for tokens, logprobs, ref_tokens, ref_logprobs in rows:
        # lengths may differ after a flip (EOS on one side): compare the common part
        for token, logprob, ref_token, ref_logprob in zip(
            tokens, logprobs, ref_tokens, ref_logprobs, strict=False
        ):
            if abs(logprob - ref_logprob) > tolerance:
                return False
            if token != ref_token:
                break  # a near-tie flipped: the rest follows another context
    return True


def sampling(settings: Settings) -> SamplingParams:
    """Unseeded, as in an RL rollout: vLLM samples seeded requests one by one."""
    return SamplingParams(
        n=settings.n, temperature=1.0, max_new_tokens=settings.new_tokens, ignore_eos=True
    )


def _timed_generate(engine: Any, bench: Bench) -> tuple[float, int]:
    start = time.perf_counter()
    rollouts = engine.generate(bench.prompt_ids, sampling(bench.settings))
    seconds = time.perf_counter() - start
    tokens = sum(len(r) for r in rollouts.response_ids)
    s = bench.settings
    if tokens != s.prompts * s.n * s.new_tokens:
        raise RuntimeError(f"expected {s.prompts * s.n * s.new_tokens} tokens, got {tokens}")
    return seconds, tokens


def measure_rollout(bench: Bench) -> dict[str, Any]:
    """Generated tokens per second of each engine: one warm-up each, then
    `repeats` rounds, the order of the two engines swapped every round."""
    engines = {"vllm": bench.vllm, "hf": bench.hf}
    result: dict[str, Any] = {"tok_s": {name: [] for name in engines}, "warmup_s": {}}
    for name, engine in engines.items():
        result["warmup_s"][name], result["tokens"] = _timed_generate(engine, bench)
    for rep in range(bench.settings.repeats):
        order = list(engines) if rep % 2 == 0 else list(reversed(engines))
        for name in order:
            seconds, tokens = _timed_generate(engines[name], bench)
            result["tok_s"][name].append(tokens / seconds)
    return result


def _load(bench: Bench, path: str, target: str) -> dict[str, float]:
    """Load state `target` into vLLM by `path`; seconds of each stage."""
    state, engine = bench.states[target], bench.vllm
    if path == "sender.sync":
        bench.sender = bench.sender or WeightSender(bench.bucket_bytes)
        start = time.perf_counter()
        metrics = bench.sender.sync(state.items(), engine)
        return {"total": time.perf_counter() - start, "pack": metrics["weight_sync/pack_s"]}
    if path == "update_weights":
        start = time.perf_counter()
        engine.update_weights(iter(state.items()))
        return {"total": time.perf_counter() - start}
    from safetensors.torch import save_file

    start = time.perf_counter()
    save_file(state, os.path.join(bench.folder, "model.safetensors"))
    saved = time.perf_counter()
    engine.loop.exclusive(lambda e: _reload_from_disk(e, bench.folder))
    done = time.perf_counter()
    return {"total": done - start, "save": saved - start, "reload": done - saved}


def _reload_from_disk(engine: Any, folder: str) -> None:
    from rl.rollout.vllm.weights import refresh_tied_layers

    # the built-in model started from dummy weights; the dummy loader cannot read files
    engine.vllm_config.load_config.load_format = "safetensors"
    engine.collective_rpc("reload_weights", kwargs={"weights_path": folder})
    engine.collective_rpc(refresh_tied_layers)  # a tied head is not rebuilt by the reload
    engine.reset_prefix_cache()  # as update_weights does: cached K/V are stale


def measure_weight_sync(bench: Bench) -> dict[str, Any]:
    """Seconds per full load of the weights by each path, paths rotated every
    round; after each load the greedy output must match the reference (see
    `matches_reference`)."""
    seconds: dict[str, list[float]] = {}
    guard: dict[str, bool] = dict.fromkeys(PATHS, True)
    failures: list[str] = []  # which round, path and target state, for the report
    for rep in range(bench.settings.repeats):
        for path in PATHS[rep % 3 :] + PATHS[: rep % 3]:
            target = "B" if bench.current == "A" else "A"
            for stage, value in _load(bench, path, target).items():
                seconds.setdefault(f"{path}:{stage}", []).append(value)
            bench.current = target
            tolerance = GUARD_TOLERANCE[bench.settings.dtype]
            ok = matches_reference(greedy(bench), bench.references[target], tolerance)
            guard[path] &= ok
            if not ok:
                failures.append(f"round {rep}: {path} -> state {target}")
    return {"seconds": seconds, "guard": guard, "failures": failures}
