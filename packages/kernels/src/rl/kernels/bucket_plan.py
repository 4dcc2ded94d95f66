"""Dtype-aware bucket planning for a stream of named tensors.

`plan_buckets` (rl.kernels.buckets) casts everything into one bucket dtype;
weight sync must not cast (a bf16 model with fp32 norms arrives as it is), so
this planner keeps each bucket to one dtype and starts a new bucket whenever
the dtype changes or the next tensor would overflow `bucket_bytes`. Tensors
whose dtype the bucket op does not take (integer and bool buffers) become
`RawEntry` groups of their own, in stream order. A tensor larger than a bucket
gets a bucket of its own: never split, never an error.

`group_stream` is lazy and generic over the item type, so the sender can group
`(name, tensor)` pairs as an exporter yields them; `plan_stream` is the same
rule applied to pure metadata.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import torch

from rl.kernels._dtypes import SUPPORTED_DTYPES
from rl.kernels.buckets import BucketLayout, layout_for

T = TypeVar("T")
Meta = tuple[str, Sequence[int], torch.dtype]


@dataclass(frozen=True)
class RawEntry:
    """A tensor sent as it is, outside any bucket (dtype the bucket op does not take)."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype

    @property
    def nbytes(self) -> int:
        return _numel(self.shape) * self.dtype.itemsize


@dataclass(frozen=True)
class PlanGroup(Generic[T]):
    """Consecutive items sent together: one bucket (`layout`) or one raw tensor (`raw`)."""

    items: tuple[T, ...]
    layout: BucketLayout | None = None
    raw: RawEntry | None = None

    @property
    def nbytes(self) -> int:
        if self.layout is not None:
            return self.layout.nbytes
        assert self.raw is not None
        return self.raw.nbytes


PlanItem = BucketLayout | RawEntry


def is_bucketable(dtype: torch.dtype) -> bool:
    """True when the bucket op packs `dtype` (fp32, fp16, bf16)."""
    return dtype in SUPPORTED_DTYPES


def group_stream(
    items: Iterable[T], meta: Callable[[T], Meta], bucket_bytes: int
) -> Iterator[PlanGroup[T]]:
    """Lazily group `items` into one-dtype buckets of at most `bucket_bytes` (see module doc).

    `meta(item)` gives `(name, shape, dtype)`. A group is yielded as soon as it
    is closed (by a dtype change, an overflow, a raw item or the end), so an
    exporter's tensors are packed while later ones are still being produced.
    Zero-size tensors join the current bucket (0 bytes).
    """
    if bucket_bytes <= 0:
        raise ValueError(f"bucket_bytes must be positive, got {bucket_bytes}")
    pending: list[T] = []
    pending_meta: list[Meta] = []
    used = 0
    for item in items:
        name, shape, dtype = meta(item)
        size = _numel(shape) * dtype.itemsize
        if pending and (dtype != pending_meta[0][2] or used + size > bucket_bytes):
            yield _bucket_group(pending, pending_meta)
            pending, pending_meta, used = [], [], 0
        if not is_bucketable(dtype):
            yield PlanGroup((item,), raw=RawEntry(name, tuple(int(s) for s in shape), dtype))
            continue
        pending.append(item)
        pending_meta.append((name, shape, dtype))
        used += size
    if pending:
        yield _bucket_group(pending, pending_meta)


def plan_stream(named_meta: Iterable[Meta], bucket_bytes: int) -> list[PlanItem]:
    """The plan for pure metadata: a `BucketLayout` per bucket, a `RawEntry` per raw tensor.

    Buckets keep their tensors' dtype (layout.dtype == every entry's dtype).
    """
    plan: list[PlanItem] = []
    for group in group_stream(named_meta, lambda m: m, bucket_bytes):
        plan.append(group.layout if group.layout is not None else group.raw)  # type: ignore[arg-type]
    return plan


def _bucket_group(items: list[T], metas: list[Meta]) -> PlanGroup[T]:
    return PlanGroup(tuple(items), layout=layout_for(metas, metas[0][2]))


def _numel(shape: Sequence[int]) -> int:
    count = 1
    for size in shape:
        count *= int(size)
    return count
