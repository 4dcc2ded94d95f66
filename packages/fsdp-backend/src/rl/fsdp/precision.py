"""Reduced-precision training on the FSDP engine, as RLinf configures it
(`fsdp_config.amp_autocast`, `fsdp_config.grad_scaler`): torch.autocast around the model's
forwards, and dynamic loss scaling with torch's ShardedGradScaler."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch

from rl.fsdp.config import GradScalerConfig


def autocast(dtype: torch.dtype | None, device: torch.device) -> AbstractContextManager[Any]:
    """torch.autocast in `dtype` on `device`'s type; nothing when `dtype` is None."""
    if dtype is None:
        return nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def grad_scaler(config: GradScalerConfig, device: torch.device) -> Any:
    """torch's ShardedGradScaler (it all-reduces the overflow flag over the ranks, so every
    rank skips the same steps) as `config` says; None when off."""
    if not config.enabled:
        return None
    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

    return ShardedGradScaler(
        device=device.type,
        init_scale=config.init_scale,
        growth_factor=config.growth_factor,
        backoff_factor=config.backoff_factor,
        growth_interval=config.growth_interval,
    )
