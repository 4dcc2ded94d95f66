"""Packing the offered weights into one-dtype buckets, and reading them back as views.

A bucket is never overwritten while a view of it may live: a receiver such as
vLLM's in-place reload keeps references to the views it was given until a
fused module (q/k/v, gate/up) is complete. On CUDA every bucket is a fresh
allocation (the caching allocator recycles it once the views die); on the CPU
`BucketPool` does the same recycling, which saves the page faults of fresh
mmap'd memory.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import torch

from rl.core.weight_sync.stats import SyncStats
from rl.kernels import (
    BucketLayout,
    BucketPool,
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


class Packer:
    """Plans and packs one sync's weights; buckets come from `pool` (fresh on CUDA).

    Counts buckets, raw tensors, sent bytes and packing time into `stats`.
    """

    def __init__(self, bucket_bytes: int, stats: SyncStats, pool: BucketPool | None = None):
        self.bucket_bytes, self.stats = bucket_bytes, stats
        self.pool = pool if pool is not None else BucketPool(max_cached_bytes=0)

    def groups(self, entries: Iterable[NamedTensor]) -> Iterator[PlanGroup[NamedTensor]]:
        """Lazy plan: one group per bucket (one dtype) or raw tensor, in stream order."""
        return group_stream(entries, meta, self.bucket_bytes)

    def pack(self, group: PlanGroup[NamedTensor]) -> PackedItem:
        """Pack one group into a bucket nobody else uses (raw groups pass as they are)."""
        if group.raw is not None:
            ((_, tensor),) = group.items
            self.stats.raw_tensors += 1
            self.stats.sent_bytes += group.raw.nbytes
            return PackedItem(group.raw, tensor)
        layout = group.layout
        assert layout is not None
        start = time.perf_counter()
        device = _device_of(group.items)
        bucket = self.pool.take(layout.numel, layout.dtype, device, self.bucket_bytes)
        pack_into(bucket, layout, [tensor for _, tensor in group.items])
        self.stats.pack_s += time.perf_counter() - start
        self.stats.buckets += 1
        self.stats.sent_bytes += layout.nbytes
        return PackedItem(layout, bucket)

    def stream(self, entries: Iterable[NamedTensor]) -> Iterator[PackedItem]:
        """Lazily plan and pack `entries`: one `PackedItem` per bucket or raw tensor."""
        for group in self.groups(entries):
            yield self.pack(group)


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
