"""Packing the offered weights into one-dtype buckets, and reading them back as views.

Every bucket is allocated fresh: a receiver such as vLLM's in-place reload
keeps references to the views it was given until a fused module (q/k/v,
gate/up) is complete, so a bucket must never be overwritten while a view of it
may live. The caching allocator recycles the memory once the views die.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import torch

from rl.core.weight_sync.stats import SyncStats
from rl.kernels import (
    BucketLayout,
    PlanGroup,
    PlanItem,
    RawEntry,
    group_stream,
    pack_into,
    unpack_bucket,
)

NamedTensor = tuple[str, torch.Tensor]


@dataclass(frozen=True)
class PackedItem:
    """One unit of transfer: a packed bucket or a raw tensor, with its plan item.

    `tensor` is the flat bucket `[layout.numel]` of `layout.dtype` for a bucket,
    or the tensor itself (its own shape and dtype) for a raw entry.
    """

    plan: PlanItem
    tensor: torch.Tensor

    def views(self) -> list[NamedTensor]:
        return item_views(self.plan, self.tensor)


def meta(entry: NamedTensor) -> tuple[str, tuple[int, ...], torch.dtype]:
    """`(name, shape, dtype)` of a named tensor, for the planner."""
    name, tensor = entry
    return name, tuple(tensor.shape), tensor.dtype


def pack_group(group: PlanGroup[NamedTensor], stats: SyncStats) -> PackedItem:
    """Pack one planned group into a freshly allocated bucket (raw groups pass as they are)."""
    if group.raw is not None:
        ((_, tensor),) = group.items
        stats.raw_tensors += 1
        stats.sent_bytes += group.raw.nbytes
        return PackedItem(group.raw, tensor)
    layout = group.layout
    assert layout is not None
    start = time.perf_counter()
    tensors = [tensor for _, tensor in group.items]
    bucket = torch.empty(layout.numel, dtype=layout.dtype, device=_device_of(group.items))
    pack_into(bucket, layout, tensors)
    stats.pack_s += time.perf_counter() - start
    stats.buckets += 1
    stats.sent_bytes += layout.nbytes
    return PackedItem(layout, bucket)


def packed_stream(
    entries: Iterable[NamedTensor], bucket_bytes: int, stats: SyncStats
) -> Iterator[PackedItem]:
    """Lazily plan and pack `entries`: one `PackedItem` per bucket or raw tensor, in order."""
    for group in group_stream(entries, meta, bucket_bytes):
        yield pack_group(group, stats)


def item_views(plan: PlanItem, tensor: torch.Tensor) -> list[NamedTensor]:
    """`(name, view)` pairs of a received bucket (zero-copy) or the raw tensor reshaped."""
    if isinstance(plan, BucketLayout):
        return unpack_bucket(tensor, plan)
    assert isinstance(plan, RawEntry)
    return [(plan.name, tensor.view(plan.shape))]


def _device_of(items: tuple[NamedTensor, ...]) -> torch.device:
    device = items[0][1].device
    for name, tensor in items:
        if tensor.device != device:
            raise ValueError(
                f"weight {name!r} is on {tensor.device} but {items[0][0]!r}, packed in the "
                f"same bucket, is on {device}: export every weight from one device"
            )
    return device
