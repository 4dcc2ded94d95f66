"""torch.distributed carrier: one sender rank broadcasts, every other rank receives.

Protocol per sync, on one process group (gloo on CPU, NCCL on GPU: the default one, or a
group opened for the weights alone, `channel.open_weight_group`):
1. the sender broadcasts the plan, a list of `BucketLayout | RawEntry`
   (names, shapes, dtypes, offsets), and its `header` (the weights' version), with
   `broadcast_object_list`;
2. then each bucket (raw tensors too) as bytes with `dist.broadcast(async_op=True)`:
   packing bucket k+1 overlaps sending bucket k, and at most `max_in_flight`
   (2: double buffering) buckets are outstanding; each bucket is a fresh
   allocation, released once its broadcast completed.
Receivers post the broadcast of bucket k+1 before handing the views of bucket
k to their engine, and feed the engine one lazy iterator per sync.

The plan needs every tensor's metadata first, so the sender holds references
to all offered tensors for the sync (no copies: an exporter's full tensors).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist

from rl.core.engines import RolloutEngine
from rl.core.weight_sync.channel import is_weight_group
from rl.core.weight_sync.packing import NamedTensor, Packer, item_views
from rl.core.weight_sync.transports import check_drained
from rl.kernels import BucketLayout, PlanItem


def wire_device(group: Any = None) -> torch.device:
    """Where buckets travel: the current CUDA device for NCCL, else the CPU."""
    if backend_name(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def backend_name(group: Any = None) -> str:
    """ "gloo" or "nccl", for the default group, a registered one or a standalone one."""
    if is_standalone(group):
        return str(group.name())
    return str(dist.get_backend(group))


def is_standalone(group: Any) -> bool:
    """A group made for one purpose outside the default world (`open_weight_group`): ranks
    are named within it (`group_src`)."""
    return is_weight_group(group)


def _source(src: int, group: Any) -> dict[str, Any]:
    return {"group_src": src} if is_standalone(group) else {"src": src}


def _as_bytes(tensor: torch.Tensor) -> torch.Tensor:
    # Broadcast bytes: every backend moves uint8, whatever the weights' dtype.
    return tensor.reshape(-1).view(torch.uint8)


def _empty_for(item: PlanItem, device: torch.device) -> torch.Tensor:
    if isinstance(item, BucketLayout):
        return torch.empty(item.numel, dtype=item.dtype, device=device)
    return torch.empty(item.shape, dtype=item.dtype, device=device)


class BroadcastSender:
    """Sender-rank transport for `WeightSender(transport=BroadcastSender(...))`."""

    def __init__(self, src: int = 0, group: Any = None, max_in_flight: int = 2) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
        self.src, self.group, self.max_in_flight = src, group, max_in_flight
        self.header: dict[str, Any] = {}  # broadcast with the next plan (the weights' version)

    def send(
        self,
        entries: Iterator[NamedTensor],
        rollout: RolloutEngine | None,
        packer: Packer,
    ) -> None:
        groups = list(packer.groups(entries))
        plan = [group.layout if group.layout is not None else group.raw for group in groups]
        source = _source(self.src, self.group)
        dist.broadcast_object_list([plan, self.header], group=self.group, **source)
        device = wire_device(self.group)
        in_flight: deque[tuple[Any, torch.Tensor]] = deque()
        for group in groups:
            bucket = packer.pack(group).tensor.to(device)
            if bucket.numel() == 0:
                continue  # both sides know from the plan: nothing to move
            if len(in_flight) == self.max_in_flight:
                in_flight.popleft()[0].wait()
            work = dist.broadcast(_as_bytes(bucket), group=self.group, async_op=True, **source)
            in_flight.append((work, bucket))
        for work, _ in in_flight:
            work.wait()


class BroadcastReceiver:
    """Receiver-rank side: `receiver.receive(engine)` once per sync, matching the sender."""

    def __init__(self, src: int = 0, group: Any = None) -> None:
        self.src, self.group = src, group
        self.header: dict[str, Any] = {}  # the sender's, from the last sync

    def receive(self, rollout: RolloutEngine) -> int:
        """Feed every broadcast weight to `rollout.update_weights`; returns the bytes received
        (the sender's `header` is then in `self.header`)."""
        box: list[Any] = [None, None]
        dist.broadcast_object_list(box, group=self.group, **_source(self.src, self.group))
        plan: list[PlanItem] = box[0]
        self.header = dict(box[1] or {})
        stream = self._views(plan)
        try:
            rollout.update_weights(stream)
            check_drained(stream, type(rollout).__name__)
        finally:
            for _ in stream:  # keep the collectives matched with the sender, even on error
                pass
        return sum(item.nbytes for item in plan)

    def _views(self, plan: list[PlanItem]) -> Iterator[NamedTensor]:
        device = wire_device(self.group)
        pending: deque[tuple[PlanItem, torch.Tensor, Any]] = deque()
        upcoming = iter(plan)
        self._post(upcoming, pending, device)
        while pending:
            item, tensor, work = pending.popleft()
            self._post(upcoming, pending, device)  # receive k+1 while the engine loads k
            if work is not None:
                work.wait()
            yield from item_views(item, tensor)

    def _post(
        self,
        upcoming: Iterator[PlanItem],
        pending: deque[tuple[PlanItem, torch.Tensor, Any]],
        device: torch.device,
    ) -> None:
        item = next(upcoming, None)
        if item is None:
            return
        tensor = _empty_for(item, device)
        work = None
        if tensor.numel():
            work = dist.broadcast(
                _as_bytes(tensor), group=self.group, async_op=True, **_source(self.src, self.group)
            )
        pending.append((item, tensor, work))
