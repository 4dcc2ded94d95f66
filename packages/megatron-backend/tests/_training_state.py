"""A megatron engine's whole training state under Hugging Face names, read from the live
optimizer (not from a state dict or a checkpoint), so that two layouts compare tensor for
tensor: for each parameter its fp32 copy (`param`), Adam's `exp_avg` and `exp_avg_sq`,
each gathered over the data-parallel ranks (the distributed optimizer holds a range of
each parameter per rank) and then over TP and PP by the engine's own weight export; and
Adam's step of each parameter this rank holds.

Imported by `_ranks.py`'s layout scenarios in the rank processes; every rank of the world
must call `training_state` together (collectives).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

KEYS = ("param", "exp_avg", "exp_avg_sq")


def training_state(mcore: Any) -> dict[str, Any]:
    """{"weights", "param", "exp_avg", "exp_avg_sq": {HF name: full tensor}, "steps": the
    set of Adam steps of this rank's parameters, "lr_scheduler", "lrs", "generator"}."""
    from rl.megatron.logprobs import unwrap

    params = [p for chunk in mcore.chunks for p in unwrap(chunk).parameters()]
    local: dict[str, list[torch.Tensor]] = {key: [] for key in KEYS}
    steps: set[float] = set()
    for param in params:
        state, step = local_state(mcore.optimizer, param)
        if step is not None:
            steps.add(step)
        for key in KEYS:
            local[key].append(state[key])
    out: dict[str, Any] = {"weights": {n: t.clone() for n, t in mcore.export_weights()}}
    for key in KEYS:
        out[key] = exported_as(mcore, params, local[key])
    out["steps"] = steps
    out["lr_scheduler"] = mcore.lr_scheduler.state_dict()
    out["lrs"] = [group["lr"] for group in mcore.optimizer.param_groups]
    out["generator"] = mcore.generator.get_state()
    return out


def local_state(optimizer: Any, param: torch.Tensor) -> tuple[dict[str, torch.Tensor], Any]:
    """This TP/PP rank's whole shard of `param`'s fp32 copy and moments (zeros where no
    Adam state exists yet), and its step (None without state)."""
    for chained in getattr(optimizer, "chained_optimizers", [optimizer]):
        buffers = getattr(chained, "buffers", None)  # a distributed optimizer's
        if buffers is not None and any(param in buffer.param_index_map for buffer in buffers):
            return distributed_state(chained, param)
        if buffers is not None:
            continue
        inner = chained.optimizer
        if any(param is p for group in inner.param_groups for p in group["params"]):
            state = inner.state.get(param, {})  # a non-distributed fp32 optimizer
            zeros = torch.zeros_like(param, dtype=torch.float32)
            full = {
                "param": param.detach().float().clone(),
                "exp_avg": state.get("exp_avg", zeros).detach().float().clone(),
                "exp_avg_sq": state.get("exp_avg_sq", zeros).detach().float().clone(),
            }
            return full, float(state["step"]) if "step" in state else None
    raise AssertionError(f"no optimizer holds a parameter of shape {tuple(param.shape)}")


def distributed_state(chained: Any, param: torch.Tensor) -> tuple[dict[str, torch.Tensor], Any]:
    """Each DP rank's range of the flattened parameter put in place in zeros, summed over
    the DP group (each element comes from exactly one rank: exact)."""
    flat = {key: torch.zeros(param.numel(), dtype=torch.float32) for key in KEYS}
    step = None
    if param in chained.model_param_gbuf_map:  # this rank holds a range of it
        held = chained._get_model_param_range_map(param)["param"]
        state = chained._get_main_param_and_optimizer_states(param)
        for key in KEYS:
            if key in state:
                flat[key][held.start : held.end] = state[key].detach().float().cpu()
        step = float(state["step"]) if "step" in state else None
    for key in KEYS:
        dist.all_reduce(flat[key], group=chained.data_parallel_group)
    return {key: tensor.view(param.shape) for key, tensor in flat.items()}, step


def exported_as(
    mcore: Any, params: list[torch.Tensor], tensors: list[torch.Tensor]
) -> dict[str, torch.Tensor]:
    """`tensors` (one per parameter, its shape) under HF names: put in the parameters'
    place for one `export_weights` (which gathers TP shards and pipeline stages and
    converts names and fused layouts), then the parameters are given back."""
    originals = [param.data for param in params]
    try:
        for param, tensor in zip(params, tensors, strict=True):
            param.data = tensor  # fp32: the moments' own precision
        return {name: tensor.clone() for name, tensor in mcore.export_weights()}
    finally:
        for param, original in zip(params, originals, strict=True):
            param.data = original
