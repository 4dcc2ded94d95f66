"""How packed weights reach the rollout engine: one small interface, several carriers.

A transport gets the checked (and delta-filtered) weights as a lazy iterator
and delivers them; `InProcessTransport` (the default) hands views of each
bucket straight to `rollout.update_weights`. The other carriers live in
`broadcast.py` (torch.distributed) and `cuda_ipc.py` (colocated processes).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from rl.core.engines import RolloutEngine
from rl.core.weight_sync.entries import nbytes
from rl.core.weight_sync.packing import NamedTensor, Packer
from rl.core.weight_sync.stats import SyncStats


class Transport(Protocol):
    """Sender side of one carrier."""

    def send(
        self,
        entries: Iterator[NamedTensor],
        rollout: RolloutEngine | None,
        packer: Packer,
    ) -> None:
        """Deliver every entry, planned and packed by `packer` (which keeps the stats)."""
        ...


class InProcessTransport:
    """Same process: `rollout.update_weights` is called once with views of fresh buckets,
    or (`pack=False`) with the offered tensors themselves (detached; a non-contiguous one
    made contiguous, as every transport gets them): the engine copies them into its
    own weights, so a bucket would be one more copy of every byte and its memory (at the
    Qwen2.5-0.5B shape's 747 MiB: 0.30 s a sync with buckets, the floor's one copy 0.06 s;
    `python -m rl.bench weight-sync`). The workers' colocated syncs use `pack=False`."""

    def __init__(self, pack: bool = True) -> None:
        self.pack = pack

    def send(
        self,
        entries: Iterator[NamedTensor],
        rollout: RolloutEngine | None,
        packer: Packer,
    ) -> None:
        if rollout is None:
            raise ValueError("InProcessTransport needs the rollout engine to deliver to")
        stream = _views(entries, packer) if self.pack else _as_offered(entries, packer.stats)
        rollout.update_weights(stream)
        check_drained(stream, type(rollout).__name__)


def _views(entries: Iterator[NamedTensor], packer: Packer) -> Iterator[NamedTensor]:
    for item in packer.stream(entries):
        yield from item.views()


def _as_offered(entries: Iterator[NamedTensor], stats: SyncStats) -> Iterator[NamedTensor]:
    for name, tensor in entries:
        stats.raw_tensors += 1
        stats.sent_bytes += nbytes(tensor)
        yield name, tensor  # `checked_entries` detached it (and made it contiguous)


def check_drained(stream: Iterator[NamedTensor], receiver: str) -> None:
    """Raise when the receiver returned before taking every weight (it would be stale)."""
    leftover = next(stream, None)
    if leftover is not None:
        raise RuntimeError(
            f"{receiver}.update_weights returned before taking every weight; "
            f"{leftover[0]!r} and possibly more were never loaded"
        )
