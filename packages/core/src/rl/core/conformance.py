"""The contract tests every registered engine passes, whatever its backend.

A backend's test suite calls `check_train_engine(name, folder)` or
`check_rollout_engine(name)` for each engine it registers (rl-fsdp, rl-megatron and
rl-rollout do, parametrised over their entries in the registry); a new backend passes
them or is not registered. The checks build the engine the way a run does (registry ->
`from_spec` on the built-in tiny model) and hold it to what `rl.core.engines` promises,
each against an independent computation: a plain `transformers` forward, a second engine,
the files written. Plain functions raising `AssertionError`: no test framework needed.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from rl.core.config import Config, load_config
from rl.core.engine_contract import declares
from rl.core.engines import (
    Closable,
    ExportsHF,
    Offloading,
    Rollouts,
    SamplingParams,
    TrainEngine,
)
from rl.core.models import load_causal_lm, load_tokenizer
from rl.core.trainer.rollout_batch import build_batch
from rl.core.workers import build as workers_build

ROWS = 4


def conformance_config(*overrides: str) -> Config:
    """The built-in tiny model's config, fp32, small batches (plus `overrides`)."""
    return load_config(
        overrides=[
            "actor.ppo_mini_batch_size=2",
            "actor.ppo_micro_batch_size_per_gpu=2",
            "critic.ppo_mini_batch_size=2",
            "rollout.n=1",
            "actor.optim.lr=1e-2",
            *overrides,
        ]
    )


def token_batch(tokenizer: Any, rows: int = ROWS, seed: int = 0) -> dict[str, torch.Tensor]:
    """A training batch of `rows` prompts with random responses of 1-4 tokens."""
    generator = torch.Generator().manual_seed(seed)
    prompts = [tokenizer(f"{i}+{2 * i}=").input_ids for i in range(rows)]
    responses = [
        torch.randint(3, len(tokenizer), (1 + i % 4,), generator=generator).tolist()
        for i in range(rows)
    ]
    rollouts = Rollouts(prompts, responses, [[0.0] * len(r) for r in responses])
    return dict(build_batch(rollouts, tokenizer.pad_token_id, 4))


def mean_logprob_loss(
    output: Any, micro: Mapping[str, torch.Tensor], mini: Mapping[str, torch.Tensor]
) -> tuple[torch.Tensor, dict[str, float]]:
    """Raise the log-prob of every response token: a loss any engine can train on."""
    mask = micro["response_mask"]
    loss = -(output.logprobs * mask).sum() / mini["response_mask"].sum().clamp(min=1)
    return loss, {}


def build_train_engine(config: Config, role: str = "actor") -> TrainEngine:
    """The `role` engine as a run builds it (`actor.strategy` / `critic.strategy`)."""
    return workers_build.build_train_engine(config, role, load_tokenizer(config.model), 4)


def _response_shape_and_dtype(value: torch.Tensor, batch: Mapping[str, Any], what: str) -> None:
    expected = tuple(batch["responses"].shape)
    assert tuple(value.shape) == expected, f"{what}: shape {tuple(value.shape)} != {expected}"
    assert value.dtype == torch.float32, f"{what}: dtype {value.dtype} != float32"


def _masked(value: torch.Tensor, batch: Mapping[str, Any]) -> torch.Tensor:
    return value[batch["response_mask"].bool()]


def check_logprobs(engine: TrainEngine, config: Config, batch: Mapping[str, Any]) -> None:
    """Log-probs and entropy of the response tokens, as a plain float64 forward of the
    exported weights gives them; without entropy, the same log-probs bit for bit."""
    output = engine.compute_logprobs(batch)
    _response_shape_and_dtype(output.logprobs, batch, "compute_logprobs().logprobs")
    assert output.entropy is not None, "compute_logprobs() gave no entropy"
    _response_shape_and_dtype(output.entropy, batch, "compute_logprobs().entropy")
    assert bool((_masked(output.entropy, batch) >= 0).all()), "negative entropy"
    bare = engine.compute_logprobs(batch, calculate_entropy=False)
    assert torch.equal(_masked(bare.logprobs, batch), _masked(output.logprobs, batch)), (
        "log-probs differ when entropy is not asked for"
    )
    expected = plain_logprobs(dict(engine.export_weights()), config, batch)
    got = _masked(output.logprobs, batch).double()
    error = float((got - _masked(expected, batch)).abs().max())
    assert error < 1e-4, f"log-probs are {error:.2e} from a float64 transformers forward"


def plain_logprobs(
    weights: Mapping[str, torch.Tensor],
    config: Config,
    batch: Mapping[str, Any],
    temperature: float | None = None,
) -> torch.Tensor:
    """Float64 log-probs (at `temperature`, else `rollout.temperature`) of each row,
    unpadded, from a `transformers` model holding `weights`: the independent oracle."""
    temperature = temperature or config.rollout.temperature
    tokenizer = load_tokenizer(config.model)
    model = load_causal_lm(config.model, tokenizer).double()
    missing, unexpected = model.load_state_dict(
        {k: v.double() for k, v in weights.items()}, strict=False
    )
    assert not unexpected, f"export_weights() yields names the model lacks: {unexpected[:3]}"
    tied = {"lm_head.weight"} if getattr(model.config, "tie_word_embeddings", False) else set()
    assert set(missing) <= tied, f"export_weights() misses {sorted(set(missing) - tied)[:3]}"
    out = torch.zeros(batch["responses"].shape, dtype=torch.float64)
    for row in range(batch["input_ids"].shape[0]):
        ids = batch["input_ids"][row][batch["attention_mask"][row].bool()].unsqueeze(0)
        length = int(batch["response_mask"][row].sum())
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0].double() / temperature
        logp = torch.log_softmax(logits, -1)[-length - 1 : -1]
        out[row, :length] = logp.gather(-1, ids[0, -length:].unsqueeze(-1)).squeeze(-1)
    return out


def check_train_engine(name: str, folder: Path, config: Config | None = None) -> None:
    """Every member of `TrainEngine`, and of the abilities the engine declares, on the
    built-in tiny model; `folder` is an empty scratch folder."""
    config = config or conformance_config(f"actor.strategy={name}", f"critic.strategy={name}")
    assert config.actor.strategy == config.critic.strategy == name, "config names another engine"
    tokenizer = load_tokenizer(config.model)
    batch = token_batch(tokenizer)
    actor = build_train_engine(config)
    check_logprobs(actor, config, batch)

    # a frozen copy of the actor (load_weights of its export) gives its log-probs exactly
    ref = build_train_engine(config, "ref")
    ref.load_weights(actor.export_weights())
    assert torch.equal(
        _masked(ref.compute_logprobs(batch).logprobs, batch),
        _masked(actor.compute_logprobs(batch).logprobs, batch),
    ), "load_weights(export_weights()) does not give the same log-probs"

    before = actor.compute_logprobs(batch).logprobs
    metrics = actor.train_step(batch, mean_logprob_loss)
    for key in ("actor/grad_norm", "actor/weight_norm", "actor/skipped_steps"):
        assert key in metrics and math.isfinite(metrics[key]), f"train_step() metrics lack {key}"
    after = actor.compute_logprobs(batch).logprobs
    assert float(_masked(after - before, batch).mean()) > 0, "train_step() did not learn"

    # save / load: a fresh engine continues exactly where the saved one stood
    actor.save(str(folder / "actor"))
    restored = build_train_engine(config)
    restored.load(str(folder / "actor"))
    assert torch.equal(restored.compute_logprobs(batch).logprobs, after), (
        "load(save()) does not restore the weights"
    )
    actor.train_step(batch, mean_logprob_loss)
    restored.train_step(batch, mean_logprob_loss)
    assert torch.equal(
        restored.compute_logprobs(batch).logprobs, actor.compute_logprobs(batch).logprobs
    ), "after load(), the next train_step differs from the saved engine's (optimizer state?)"

    critic = build_train_engine(config, "critic")
    _response_shape_and_dtype(critic.compute_values(batch), batch, "compute_values()")

    if declares(actor, Offloading):
        check_offloading(actor, batch)
    if declares(actor, ExportsHF):
        check_hf_export(actor, config, folder / "hf", batch)


def check_offloading(engine: Any, batch: Mapping[str, Any]) -> None:
    """offload() then onload() leaves the model as it was."""
    before = engine.compute_logprobs(batch).logprobs
    assert isinstance(engine.offloads, bool), "offloads is not a bool"
    engine.offload()
    engine.onload()
    assert torch.equal(engine.compute_logprobs(batch).logprobs, before), (
        "offload()/onload() changed the log-probs"
    )


def check_hf_export(engine: Any, config: Config, folder: Path, batch: Mapping[str, Any]) -> None:
    """save_hf() writes a folder `transformers` loads with the engine's weights."""
    from transformers import AutoModelForCausalLM

    engine.save_hf(str(folder), load_tokenizer(config.model))
    loaded = AutoModelForCausalLM.from_pretrained(folder)
    exported = dict(engine.export_weights())
    for name, tensor in loaded.state_dict().items():
        if name in exported:
            assert torch.equal(tensor, exported[name].to(tensor.dtype)), f"save_hf(): {name}"
    assert (folder / "tokenizer_config.json").exists(), "save_hf() wrote no tokenizer"


def check_rollout_engine(name: str, config: Config | None = None) -> None:
    """Every member of `RolloutEngine`, and of the abilities the engine declares, on the
    built-in tiny model: generated rows, their log-probs against a float64 forward of the
    weights it was given, per-request generation, weight updates that take effect, and
    sleep / wake."""
    config = config or conformance_config(f"rollout.name={name}", "rollout.max_num_seqs=16")
    assert config.rollout.name == name, "config names another engine"
    tokenizer = load_tokenizer(config.model)
    engine: Any = workers_build.build_rollout_engine(config, tokenizer)
    try:
        _check_rollouts(engine, config, tokenizer)
    finally:
        if declares(engine, Closable):
            engine.close()


def _check_rollouts(engine: Any, config: Config, tokenizer: Any) -> None:
    prompts = [tokenizer(f"{i}+{i}=").input_ids for i in range(3)]
    weights = dict(load_causal_lm(config.model, tokenizer, seed=11).state_dict())
    groups = {name: engine.weight_group(name) for name in weights}
    assert all(isinstance(group, str) for group in groups.values()), "weight_group() not a str"
    engine.update_weights(iter(weights.items()))
    sampling = SamplingParams(n=2, temperature=1.0, max_new_tokens=4, seed=7)
    rollouts = engine.generate(prompts, sampling)
    _check_rows(rollouts, prompts, sampling)
    _check_logprobs_match(rollouts, weights, config, tokenizer, sampling.temperature)

    one = asyncio.run(engine.generate_one(prompts[0], replace(sampling, n=1)))
    _check_rows(one, prompts[:1], replace(sampling, n=1))

    # new weights take effect: the log-probs follow them (a silent no-op update fails)
    other = dict(load_causal_lm(config.model, tokenizer, seed=12).state_dict())
    engine.sleep()
    engine.wake()
    engine.update_weights(iter(other.items()))
    again = engine.generate(prompts, sampling)
    _check_rows(again, prompts, sampling)
    _check_logprobs_match(again, other, config, tokenizer, sampling.temperature)


def _check_rows(rollouts: Rollouts, prompts: Sequence[Sequence[int]], sampling: Any) -> None:
    rows = len(prompts) * sampling.n
    assert len(rollouts.response_ids) == rows, f"{len(rollouts.response_ids)} rows != {rows}"
    assert [list(p) for p in rollouts.prompt_ids] == [
        list(p) for p in prompts for _ in range(sampling.n)
    ], "prompt_ids are not the prompts, each n times in order"
    for row, (response, logprobs) in enumerate(
        zip(rollouts.response_ids, rollouts.logprobs, strict=True)
    ):
        assert 1 <= len(response) <= sampling.max_new_tokens, f"row {row}: {len(response)} tokens"
        assert len(logprobs) == len(response), f"row {row}: log-probs and tokens differ in length"
        assert all(math.isfinite(x) and x <= 0 for x in logprobs), f"row {row}: bad log-probs"
    assert not rollouts.finish_reasons or set(rollouts.finish_reasons) <= {"stop", "length"}


def _check_logprobs_match(
    rollouts: Rollouts,
    weights: Mapping[str, torch.Tensor],
    config: Config,
    tokenizer: Any,
    temperature: float,
) -> None:
    """The engine's log-probs of what it sampled, as a float64 forward of `weights`."""
    batch = dict(
        build_batch(rollouts, tokenizer.pad_token_id, max(len(r) for r in rollouts.response_ids))
    )
    expected = _masked(plain_logprobs(weights, config, batch, temperature), batch)
    got = _masked(batch["rollout_logprobs"].double(), batch)
    error = float((got - expected).abs().max())
    assert error < 2e-3, f"rollout log-probs are {error:.2e} from a float64 forward"
