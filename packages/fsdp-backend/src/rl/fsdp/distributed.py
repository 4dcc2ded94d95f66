"""The FSDP engine's device mesh (the process group itself: `rl.core.distributed`)."""

from __future__ import annotations

import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from rl.core.config import ConfigError
from rl.core.distributed import ensure_process_group

__all__ = ["ensure_process_group", "fsdp_mesh"]


def fsdp_mesh(
    device_type: str, fsdp_size: int = -1, key: str = "fsdp_config.fsdp_size"
) -> DeviceMesh:
    """The mesh one model is sharded over: 1-D over the whole world, or HSDP's 2-D
    (replicate × shard) when `fsdp_size` is smaller than the world (verl's semantics:
    -1 = the whole world). `key` names the config key in errors."""
    ensure_process_group(device_type)
    world = dist.get_world_size()
    size = world if fsdp_size == -1 else fsdp_size
    if size > world or world % size:
        raise ConfigError(
            f"{key} = {fsdp_size} does not divide the world of {world} ranks: use -1 or a "
            f"divisor of {world}"
        )
    if size == world:
        return init_device_mesh(device_type, (world,), mesh_dim_names=("fsdp",))
    return init_device_mesh(
        device_type, (world // size, size), mesh_dim_names=("replicate", "shard")
    )
