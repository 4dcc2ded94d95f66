"""`perf/tflops/actor` and `perf/mfu/actor`: the actor update's model FLOPs per second per
device, and their share of the device's peak (verl's `perf/mfu/actor`).

The FLOPs are counted (`rl.core.plan.flops`) from the model's dims and the batch's real
token counts: a forward and its backward (3 forwards; 4 with activation recomputation) per
PPO epoch, over prompt + response rows with the LM head on the response positions only,
each prompt counted once for the rows that share it when the engine says it shared them
(`actor/prompt_tokens_shared` in its update's metrics): the work it did, not the work a
padded batch would do. The peak is
`trainer.device_peak_tflops`, else the dense bf16/fp16 tensor-core figure of a known GPU;
on CPU there is none unless set (the bench measures this machine's matmul rate instead).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache

import torch

from rl.core.config import Config, ModelConfig
from rl.core.plan import flops
from rl.core.plan.model_dims import ModelDims, model_dims

# dense bf16 / fp16 tensor-core TFLOPS by device-name fragment (the vendors' data sheets)
GPU_PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "H800": 989.0, "A100": 312.0, "A800": 312.0}


def device_peak_tflops(config: Config) -> float | None:
    """The configured peak, else a known GPU's for a 16-bit model; None when unknown."""
    if config.trainer.device_peak_tflops is not None:
        return config.trainer.device_peak_tflops
    if config.trainer.device != "cuda" or config.model.dtype == "float32":
        return None
    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name()
    return next((peak for key, peak in GPU_PEAK_TFLOPS.items() if key in name), None)


def update_flops(
    dims: ModelDims,
    batch: Mapping[str, torch.Tensor],
    shared_prompts: bool,
    recompute: bool,
    epochs: int,
) -> float:
    """Model FLOPs of `epochs` passes of forward + backward over `batch`'s real tokens."""
    prompt_lengths = batch["attention_mask"][:, : -batch["responses"].shape[1]].sum(1).tolist()
    response_lengths = batch["response_mask"].sum(1).tolist()
    total = 0.0
    seen: set[tuple[int, ...]] = set()
    prompts = batch["input_ids"][:, : -batch["responses"].shape[1]]
    for row, (p, r) in enumerate(zip(prompt_lengths, response_lengths, strict=True)):
        p, r = int(p), int(r)
        if shared_prompts:
            key = tuple(prompts[row, prompts.shape[1] - p :].tolist())
            if key not in seen:
                seen.add(key)
                total += flops.forward_flops(dims, p, flops.causal_keys(0, p), 0)
            total += flops.forward_flops(dims, r, flops.causal_keys(p, r), r)
        else:
            total += flops.forward_flops(dims, p + r, flops.causal_keys(0, p + r), r)
    return (4 if recompute else 3) * epochs * total


@lru_cache(maxsize=4)
def _dims(model: ModelConfig) -> ModelDims | None:
    """The model's dims, read once per model (not every step)."""
    try:
        return model_dims(replace(Config(), model=model))
    except Exception:  # a model without a readable config.json: no perf metrics
        return None


def actor_devices(config: Config) -> int:
    """The devices the actor's update runs on: its placement's under Ray, else one."""
    if config.trainer.launcher != "ray":
        return 1
    from rl.core.workers.launch import cluster_placement

    return len(cluster_placement(config).devices.get("actor") or (0,))


def actor_perf_metrics(
    config: Config, batch: Mapping[str, torch.Tensor], seconds: float, shared_prompts: bool
) -> dict[str, float]:
    """`perf/tflops/actor` (and `perf/mfu/actor` where a peak is known) of one update;
    `shared_prompts`: the engine packed each prompt once for its rows."""
    dims = _dims(config.model)
    if dims is None or seconds <= 0:
        return {}
    recompute, epochs = config.model.gradient_checkpointing, config.actor.ppo_epochs
    done = update_flops(dims, batch, shared_prompts, recompute, epochs)
    tflops = done / seconds / actor_devices(config) / 1e12
    metrics = {"perf/tflops/actor": tflops}
    peak = device_peak_tflops(config)
    if peak is not None:
        metrics["perf/mfu/actor"] = tflops / peak
    return metrics
