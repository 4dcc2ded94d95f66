"""Stepping aside on a shared device: the FSDP engine's weights and optimizer state moved
to the CPU while another role runs, and back (`fsdp_config.param_offload` /
`optimizer_offload`: only what they name when either is set, both otherwise)."""

from __future__ import annotations

import torch

from rl.fsdp.config import FSDPConfig


def move(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None,
    fsdp: FSDPConfig,
    home: torch.device,
    device: torch.device,
) -> None:
    """Move what `fsdp` offloads to `device`; nothing when the engine's `home` is the CPU
    or the offload policy keeps the shards there."""
    if home.type == "cpu" or fsdp.offload_policy:
        return
    either = fsdp.param_offload or fsdp.optimizer_offload
    if fsdp.param_offload or not either:
        model.to(device)
    if optimizer is not None and (fsdp.optimizer_offload or not either):
        for state in optimizer.state.values():
            for key, value in state.items():
                if isinstance(value, torch.Tensor):
                    state[key] = value.to(device, non_blocking=True)
