"""torch.distributed set-up shared by the training backends: one process group per process.

The embedded default runs a world of size 1 (gloo on CPU, NCCL on GPU); a launcher
(torchrun, a Ray worker group) that already set RANK/WORLD_SIZE and MASTER_ADDR/PORT
gets a multi-process group with the same code.
"""

from __future__ import annotations

import os
import socket

import torch
import torch.distributed as dist


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ensure_process_group(device_type: str) -> None:
    """Initialise the default process group once (world size 1 unless a launcher set one).

    A launcher's RANK/WORLD_SIZE/MASTER_* are used as given; a lone process gets a
    private free port and leaves the environment alone, so child processes it starts
    do not inherit (and collide on) its rendezvous address.
    """
    if dist.is_initialized():
        return
    backend = "nccl" if device_type == "cuda" else "gloo"
    if device_type == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    if "WORLD_SIZE" in os.environ and "MASTER_ADDR" in os.environ:
        dist.init_process_group(backend=backend)
    else:
        dist.init_process_group(
            backend=backend, init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1
        )
