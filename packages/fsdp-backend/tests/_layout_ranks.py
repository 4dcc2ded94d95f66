"""One rank of an FSDP checkpoint-layout scenario:
`python _layout_ranks.py RANK WORLD PORT OUT STAGE CHECKPOINT OPTIONS`.

Run by `test_checkpoint_layouts` in separate processes (gloo on CPU), at 1 rank (the plain
model, fused AdamW) or 2 (FSDP2 shards, foreach AdamW; OPTIONS, a JSON object, may give
`fsdp_size` 1: HSDP, two replicas of one shard). The model, batches and loss are
`_tied_ranks.py`'s (a tied embedding: one tensor under two names, optimized once).

STAGE `save`: the actor trains two steps (Adam's moments and step exist), saves CHECKPOINT,
then trains a third step. STAGE `load`: a fresh actor (other initial weights, no Adam state)
loads CHECKPOINT, then trains that third step. Each rank writes OUT/<rank>.pt: the full
(gathered) training state right after saving or loading (`training_state`), and the third
step's metrics and weights.
"""

from __future__ import annotations

import json
import os
import sys
import warnings

import torch
from _tied_ranks import as_rank, make_batch, make_engine, nll


def full(tensor: torch.Tensor) -> torch.Tensor:
    """The whole tensor, copied: a DTensor shard gathered from every rank (a collective)."""
    whole = tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
    return whole.detach().clone()


def training_state(engine) -> dict:
    """What a resumed run must continue from, read from the live objects, not from a state
    dict: each parameter's full tensor, its Adam state (exp_avg, exp_avg_sq, step) by
    parameter name, the LR schedule, the groups' learning rates and the sampling
    generator. Every rank gathers every tensor, in the same order."""
    named = list(engine.model.named_parameters())  # a tied tensor once, under its first name
    name_of = {id(param): name for name, param in named}
    optimizer = engine.optimizer
    adam = {
        name_of[id(param)]: {key: full(value) for key, value in optimizer.state[param].items()}
        for group in optimizer.param_groups
        for param in group["params"]
        if param in optimizer.state
    }
    return {
        "parameters": {name: full(param) for name, param in named},
        "adam": adam,
        "lr_scheduler": engine.lr_scheduler.state_dict(),
        "lrs": [group["lr"] for group in optimizer.param_groups],
        "generator": engine.generator.get_state(),
    }


def save_stage(checkpoint: str, options: dict) -> dict:
    engine = make_engine("qwen2", int(os.environ["RANK"]), options)
    engine.train_step(make_batch(seed=0), nll)
    engine.train_step(make_batch(seed=1), nll)
    engine.save(checkpoint)
    state = training_state(engine)
    metrics = engine.train_step(make_batch(seed=2), nll)
    return {"state": state, "next": (metrics, dict(engine.export_weights()))}


def load_stage(checkpoint: str, options: dict) -> dict:
    engine = make_engine("qwen2", int(os.environ["RANK"]), options, seed=7)
    torch.rand(3, generator=engine.generator)  # its sampling generator moved on too
    engine.load(checkpoint)
    state = training_state(engine)
    metrics = engine.train_step(make_batch(seed=2), nll)
    return {"state": state, "next": (metrics, dict(engine.export_weights()))}


def main() -> None:
    warnings.simplefilter("ignore")
    rank, world, port, out, stage, checkpoint, options = sys.argv[1:8]
    produce = {"save": save_stage, "load": load_stage}[stage]
    as_rank(rank, world, port, out, lambda: produce(checkpoint, json.loads(options)))


if __name__ == "__main__":
    main()
