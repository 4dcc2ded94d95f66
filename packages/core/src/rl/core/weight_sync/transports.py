"""How packed weights reach the rollout engine: one small interface, several carriers.

A transport gets the checked (and delta-filtered) weights as a lazy iterator
and delivers them; `InProcessTransport` (the default) hands views of each
bucket straight to `rollout.update_weights`. The other carriers live in
`broadcast.py` (torch.distributed) and `cuda_ipc.py` (colocated processes).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import torch

from rl.core.engines import RolloutEngine
from rl.core.weight_sync.packing import NamedTensor, packed_stream
from rl.core.weight_sync.stats import SyncStats


class Transport(Protocol):
    """Sender side of one carrier."""

    def send(
        self,
        entries: Iterator[NamedTensor],
        rollout: RolloutEngine | None,
        bucket_bytes: int,
        stats: SyncStats,
    ) -> None:
        """Deliver every entry (pack into buckets of at most `bucket_bytes`), updating `stats`."""
        ...


class InProcessTransport:
    """Same process: `rollout.update_weights` is called once with views of fresh buckets."""

    def send(
        self,
        entries: Iterator[NamedTensor],
        rollout: RolloutEngine | None,
        bucket_bytes: int,
        stats: SyncStats,
    ) -> None:
        if rollout is None:
            raise ValueError("InProcessTransport needs the rollout engine to deliver to")
        stream = _views(entries, bucket_bytes, stats)
        rollout.update_weights(stream)
        check_drained(stream, type(rollout).__name__)


def _views(
    entries: Iterator[NamedTensor], bucket_bytes: int, stats: SyncStats
) -> Iterator[tuple[str, torch.Tensor]]:
    for item in packed_stream(entries, bucket_bytes, stats):
        yield from item.views()


def check_drained(stream: Iterator[NamedTensor], receiver: str) -> None:
    """Raise when the receiver returned before taking every weight (it would be stale)."""
    leftover = next(stream, None)
    if leftover is not None:
        raise RuntimeError(
            f"{receiver}.update_weights returned before taking every weight; "
            f"{leftover[0]!r} and possibly more were never loaded"
        )
