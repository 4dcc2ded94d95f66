"""torch.distributed set-up for the FSDP engine: one process group per process.

The embedded default runs a world of size 1 (gloo on CPU, NCCL on GPU); a
launcher (torchrun, a Ray worker group) that already set RANK/WORLD_SIZE and
MASTER_ADDR/PORT gets a multi-process group with the same code.
"""

from __future__ import annotations

import os
import socket

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ensure_process_group(device_type: str) -> None:
    """Initialise the default process group once (world size 1 unless a launcher set one)."""
    if dist.is_initialized():
        return
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(_free_port()))
    rank = int(os.environ.get("RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    backend = "nccl" if device_type == "cuda" else "gloo"
    if device_type == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend=backend, rank=rank, world_size=world_size)


def data_parallel_mesh(device_type: str) -> DeviceMesh:
    ensure_process_group(device_type)
    return init_device_mesh(device_type, (dist.get_world_size(),), mesh_dim_names=("dp",))
