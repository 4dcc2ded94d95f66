"""A process group opened for the weights alone: the trainer's sending rank and the
rollout replicas of a disaggregated placement, which are not in one torch.distributed
world (the trainer ranks have FSDP's or megatron's, a vLLM replica its own).

The group is a gloo (CPU) or NCCL (GPU) backend built from a TCP store that the sending
rank hosts; it is registered nowhere, so collectives on it name ranks within it
(`group_src`, which `broadcast.BroadcastSender` / `BroadcastReceiver` use for such a group).
Every member must call `open_weight_group` at the same time: the backend connects them all.
"""

from __future__ import annotations

import datetime
import warnings
from typing import Any

import torch.distributed as dist

# the weight groups this process opened (by id): collectives on them name ranks within them
OPENED: dict[int, tuple[Any, Any]] = {}


def is_weight_group(group: Any) -> bool:
    return group is not None and id(group) in OPENED


def open_weight_group(
    address: str, port: int, rank: int, size: int, backend: str = "gloo", timeout_s: float = 600
) -> Any:
    """This process's member of the weight group: rank 0 hosts the store at
    `address:port` (and sends); ranks 1 .. size-1 receive."""
    timeout = datetime.timedelta(seconds=timeout_s)
    store = dist.TCPStore(address, port, size, rank == 0, timeout=timeout)
    prefixed = dist.PrefixStore("rl-weights", store)
    group: Any
    if backend == "nccl":
        options = dist.ProcessGroupNCCL.Options()
        options._timeout = timeout
        group = dist.ProcessGroupNCCL(prefixed, rank, size, options)
    elif backend == "gloo":
        group = dist.ProcessGroupGloo(prefixed, rank, size, timeout)
    else:
        raise ValueError(f"weight group backend {backend!r}: gloo or nccl")
    OPENED[id(group)] = (group, store)  # kept alive with their store for the process's life
    # torch warns that a backend is used as a process group: that is the point here
    warnings.filterwarnings("ignore", message=".*as a ProcessGroup.*")
    return group


def close_weight_group(group: Any) -> None:
    """Let go of a weight group this process opened (the membership changed: a new one
    is formed); its store and connections close with the last reference."""
    OPENED.pop(id(group), None)
