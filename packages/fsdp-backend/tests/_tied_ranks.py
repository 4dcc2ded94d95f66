"""One rank of a tied-embedding FSDP scenario: `python _tied_ranks.py RANK WORLD PORT OUT OPTIONS`.

Run by `test_tied.run_ranks` in separate processes (gloo on CPU); the test process
imports it for the same model, batch and engine at one rank. OPTIONS is a JSON
object: `family` (qwen2 | qwen3 | llama), `meta_init`, `fused`, `tie` (default true),
`fsdp_size` (default -1: every rank). Each rank writes what the
test compares to OUT/<rank>.pt; rank 0 also writes OUT/hf (`save_hf`).
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import transformers

from rl.core.config import OptimConfig
from rl.core.engines import Rollouts
from rl.core.trainer.rollout_batch import build_batch
from rl.fsdp.config import FSDPConfig

SHAPE = dict(
    vocab_size=96,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=32,
    max_position_embeddings=256,
)
FAMILIES = {
    "qwen2": {},
    "qwen3": {},
    "llama": dict(
        rope_scaling=dict(
            rope_type="llama3",
            factor=32.0,
            low_freq_factor=1.0,
            high_freq_factor=4.0,
            original_max_position_embeddings=64,
        )
    ),
}
LR = 1e-3


def tied_model(family: str, seed: int = 0, meta: bool = False, tie: bool = True) -> torch.nn.Module:
    """A tiny random model with tied word embeddings (on the meta device if `meta`)."""
    config = transformers.AutoConfig.for_model(
        family, **SHAPE, **FAMILIES[family], tie_word_embeddings=tie
    )
    if meta:
        with torch.device("meta"):
            return transformers.AutoModelForCausalLM.from_config(config)
    torch.manual_seed(seed)
    return transformers.AutoModelForCausalLM.from_config(config)


def make_batch(rows: int = 8, seed: int = 0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    prompts = [
        torch.randint(1, 96, (3 + i % 4,), generator=generator).tolist() for i in range(rows)
    ]
    responses = [
        torch.randint(1, 96, (1 + (3 * i) % 5,), generator=generator).tolist() for i in range(rows)
    ]
    return build_batch(Rollouts(prompts, responses, [[0.0] * len(r) for r in responses]), 0, 5)


def nll(output, micro, mini):
    mask = micro["response_mask"]
    return -(output.logprobs * mask).sum() / mini["response_mask"].sum(), {}


def make_engine(family: str, world_rank: int, options: dict, seed: int = 0):
    from rl.core.role_spec import RoleSpec
    from rl.fsdp.engine import FSDPTrainEngine

    meta_init = bool(options.get("meta_init"))
    meta = meta_init and world_rank != 0
    model = tied_model(family, seed=seed, meta=meta, tie=options.get("tie", True))
    return FSDPTrainEngine(
        model,
        RoleSpec(
            "actor",
            optim=OptimConfig(lr=LR),
            mini_batch_size=8,
            micro_batch_size=2,
            use_fused_kernels=options.get("fused"),
            backends={
                "fsdp_config": FSDPConfig(
                    meta_init=meta_init, fsdp_size=options.get("fsdp_size", -1)
                )
            },
        ),
    )


def tie_of(engine) -> bool:
    model = engine.model
    return model.lm_head.weight is model.model.embed_tokens.weight


def scenario(options: dict) -> dict:
    family = options.get("family", "qwen2")
    rank = int(os.environ["RANK"])
    out_dir = Path(os.environ["RL_TEST_OUT"])
    engine = make_engine(family, rank, options)
    batch = make_batch()
    out: dict = {
        "tied_at_start": tie_of(engine),
        "optimizer_params": sum(len(g["params"]) for g in engine.optimizer.param_groups),
        "model_params": len(list(engine.model.parameters())),
        "start": dict(engine.export_weights()),
    }
    out["metrics"] = engine.train_step(batch, nll)
    out["tied_after_step"] = tie_of(engine)
    out["stepped"] = {name: t.clone() for name, t in engine.export_weights()}
    checkpoint = out_dir / "checkpoint"
    engine.save(str(checkpoint))
    second = make_batch(seed=1)
    out["straight"] = (engine.train_step(second, nll), dict(engine.export_weights()))
    fresh = make_engine(family, rank, {**options, "meta_init": False}, seed=7)
    fresh.load(str(checkpoint))
    out["loaded"] = {name: t.clone() for name, t in fresh.export_weights()}
    out["resumed"] = (fresh.train_step(second, nll), dict(fresh.export_weights()))
    out["tied_after_resume"] = tie_of(fresh)
    fresh.save_hf(str(out_dir / "hf"))
    return out


def as_rank(rank: str, world: str, port: str, out: str, produce: Callable[[], Any]) -> None:
    """Run `produce()` as rank `rank` of `world` (the environment torch.distributed starts
    from) and write its result to OUT/<rank>.pt; then leave the process group together."""
    os.environ.update(
        RANK=rank,
        WORLD_SIZE=world,
        LOCAL_RANK=rank,
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=port,
    )
    torch.save(produce(), Path(out) / f"{rank}.pt")
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def main() -> None:
    warnings.simplefilter("ignore")
    rank, world, port, out, options = sys.argv[1:6]
    os.environ["RL_TEST_OUT"] = out
    as_rank(rank, world, port, out, lambda: scenario(json.loads(options)))


if __name__ == "__main__":
    main()
