"""Weight-resharding buckets: many named tensors <-> few flat buffers.

The trainer streams its weights to the rollout engine in buckets of a fixed
byte size: `plan_buckets` lays the tensors out, `pack_bucket` casts them into
one flat buffer (one kernel launch on GPU), and the receiver gets them back
with `unpack_bucket` (zero-copy views) or `unpack_bucket_into` (cast-copy into
its own parameters).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

from rl.kernels._dtypes import dtype_code
from rl.kernels.ops.bucket import bucket_pack, bucket_unpack


@dataclass(frozen=True)
class BucketEntry:
    """One tensor inside a bucket: where it starts (in bucket elements) and its meta."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    offset: int

    @property
    def numel(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count


@dataclass(frozen=True)
class BucketLayout:
    """Where each tensor lives in a flat bucket of `numel` elements of `dtype`."""

    dtype: torch.dtype
    numel: int
    entries: tuple[BucketEntry, ...]

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize

    @property
    def offsets(self) -> list[int]:
        return [entry.offset for entry in self.entries]


def _align_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def layout_for(
    named_meta: Iterable[tuple[str, Sequence[int], torch.dtype]],
    dtype: torch.dtype,
    align_elements: int = 1,
) -> BucketLayout:
    """Lay tensors out back to back, each start rounded up to `align_elements`."""
    dtype_code(dtype, "bucket")
    if align_elements < 1:
        raise ValueError(f"align_elements must be >= 1, got {align_elements}")
    entries, cursor = [], 0
    for name, shape, tensor_dtype in named_meta:
        dtype_code(tensor_dtype, f"tensor {name!r}")
        entry = BucketEntry(name, tuple(int(s) for s in shape), tensor_dtype, cursor)
        entries.append(entry)
        cursor = _align_up(cursor + entry.numel, align_elements)
    return BucketLayout(dtype, cursor, tuple(entries))


def plan_buckets(
    named_meta: Iterable[tuple[str, Sequence[int], torch.dtype]],
    bucket_bytes: int,
    dtype: torch.dtype,
    align_elements: int = 1,
) -> list[BucketLayout]:
    """Split tensors, in order, into buckets of at most `bucket_bytes` each.

    A tensor larger than `bucket_bytes` gets a bucket of its own (never split),
    so the receiver always sees whole tensors.
    """
    if bucket_bytes <= 0:
        raise ValueError(f"bucket_bytes must be positive, got {bucket_bytes}")
    capacity = max(bucket_bytes // dtype.itemsize, 1)
    groups: list[list[tuple[str, Sequence[int], torch.dtype]]] = [[]]
    used = 0
    for name, shape, tensor_dtype in named_meta:
        numel = 1
        for size in shape:
            numel *= int(size)
        if groups[-1] and used + numel > capacity:
            groups.append([])
            used = 0
        groups[-1].append((name, shape, tensor_dtype))
        used = _align_up(used + numel, align_elements)
    return [layout_for(group, dtype, align_elements) for group in groups if group]


def pack_bucket(
    named_tensors: Sequence[tuple[str, torch.Tensor]],
    dtype: torch.dtype | None = None,
    align_elements: int = 1,
) -> tuple[torch.Tensor, BucketLayout]:
    """Cast `named_tensors` into one new flat buffer; returns (bucket, layout).

    `dtype` defaults to the first tensor's dtype. Gaps left by alignment are
    not initialised (receivers never read them).
    """
    if dtype is None:
        dtype = named_tensors[0][1].dtype if named_tensors else torch.float32
    layout = layout_for(((n, t.shape, t.dtype) for n, t in named_tensors), dtype, align_elements)
    device = named_tensors[0][1].device if named_tensors else torch.device("cpu")
    bucket = torch.empty(layout.numel, dtype=dtype, device=device)
    pack_into(bucket, layout, [t for _, t in named_tensors])
    return bucket, layout


def pack_into(bucket: torch.Tensor, layout: BucketLayout, tensors: Sequence[torch.Tensor]) -> None:
    """Cast `tensors` (in layout order) into an existing `bucket` (reused across steps)."""
    _check_bucket(bucket, layout)
    for entry, tensor in zip(layout.entries, tensors, strict=True):
        if tuple(tensor.shape) != entry.shape:
            raise ValueError(
                f"tensor {entry.name!r} has shape {tuple(tensor.shape)} but the layout "
                f"planned {entry.shape}"
            )
    bucket_pack([t.contiguous() for t in tensors], layout.offsets, bucket)


def unpack_bucket(bucket: torch.Tensor, layout: BucketLayout) -> list[tuple[str, torch.Tensor]]:
    """Zero-copy views of each tensor, in the bucket's dtype and the entry's shape."""
    _check_bucket(bucket, layout)
    return [
        (entry.name, bucket.narrow(0, entry.offset, entry.numel).view(entry.shape))
        for entry in layout.entries
    ]


def unpack_bucket_into(
    bucket: torch.Tensor, layout: BucketLayout, tensors: Sequence[torch.Tensor]
) -> None:
    """Cast-copy each slice into `tensors` (e.g. the receiver's parameters), any float dtype."""
    _check_bucket(bucket, layout)
    if len(tensors) != len(layout.entries):
        raise ValueError(f"layout has {len(layout.entries)} entries but got {len(tensors)} tensors")
    for entry, tensor in zip(layout.entries, tensors, strict=True):
        if tensor.numel() != entry.numel:
            raise ValueError(
                f"destination for {entry.name!r} has {tensor.numel()} elements, "
                f"the bucket holds {entry.numel} (shape {entry.shape})"
            )
    bucket_unpack(bucket, layout.offsets, list(tensors))


def _check_bucket(bucket: torch.Tensor, layout: BucketLayout) -> None:
    if bucket.dtype != layout.dtype:
        raise TypeError(
            f"bucket has dtype {bucket.dtype} but its layout was planned for {layout.dtype}"
        )
    if bucket.dim() != 1 or bucket.numel() < layout.numel:
        raise ValueError(
            f"bucket of shape {tuple(bucket.shape)} is too small for its layout "
            f"({layout.numel} elements of {layout.dtype})"
        )


class BucketPool:
    """Bucket memory on the CPU, recycled once no view of a bucket is alive.

    CPU buckets of tens of MB come straight from mmap, so a fresh one pays a
    page fault per page on first touch (measured: packing into fresh buckets
    is ~3x slower than into reused ones). A buffer is handed out again only
    when its storage has no user but the pool: a receiver that still holds
    views (vLLM keeps a fused module's parts until the layer is complete)
    keeps it busy, and the pool allocates another. On CUDA `take` allocates
    fresh: the caching allocator already recycles blocks once views die.
    At most `max_cached_bytes` stay cached; beyond that buffers are one-off.
    """

    def __init__(self, max_cached_bytes: int = 2 << 30) -> None:
        self.max_cached_bytes = max_cached_bytes
        self._buffers: list[tuple[torch.Tensor, int]] = []  # (uint8 buffer, idle use count)

    def take(
        self, numel: int, dtype: torch.dtype, device: torch.device, reserve_bytes: int = 0
    ) -> torch.Tensor:
        """A 1-D tensor of `numel` elements of `dtype` on `device` that nobody else uses.

        A new CPU buffer holds at least `reserve_bytes` (pass the bucket size), so
        that it fits the later, slightly larger buckets of the same plan.
        """
        if device.type != "cpu":
            return torch.empty(numel, dtype=dtype, device=device)
        nbytes = numel * dtype.itemsize
        idle = [
            buffer
            for buffer, count in self._buffers
            if buffer.numel() >= nbytes and _use_count(buffer) <= count
        ]
        if idle:
            buffer = min(idle, key=lambda b: b.numel())
        else:
            buffer = torch.empty(max(nbytes, reserve_bytes, 1), dtype=torch.uint8)
            if self.cached_bytes + buffer.numel() <= self.max_cached_bytes:
                self._buffers.append((buffer, _use_count(buffer)))
        return buffer.narrow(0, 0, nbytes).view(dtype)

    @property
    def cached_bytes(self) -> int:
        return sum(buffer.numel() for buffer, _ in self._buffers)

    def clear(self) -> None:
        self._buffers.clear()


def _use_count(tensor: torch.Tensor) -> int:
    # References to the storage: the tensor itself, views of it, and this call's handle.
    return int(torch._C._storage_Use_Count(tensor.untyped_storage()._cdata))
