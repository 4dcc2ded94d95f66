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
from rl.core.weight_sync.packing import NamedTensor, Packer


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
    """Same process: `rollout.update_weights` is called once with views of fresh buckets."""

    def send(
        self,
        entries: Iterator[NamedTensor],
        rollout: RolloutEngine | None,
        packer: Packer,
    ) -> None:
        if rollout is None:
            raise ValueError("InProcessTransport needs the rollout engine to deliver to")
        stream = _views(entries, packer)
        rollout.update_weights(stream)
        check_drained(stream, type(rollout).__name__)


def _views(entries: Iterator[NamedTensor], packer: Packer) -> Iterator[NamedTensor]:
    for item in packer.stream(entries):
        yield from item.views()


def check_drained(stream: Iterator[NamedTensor], receiver: str) -> None:
    """Raise when the receiver returned before taking every weight (it would be stale)."""
    leftover = next(stream, None)
    if leftover is not None:
        raise RuntimeError(
            f"{receiver}.update_weights returned before taking every weight; "
            f"{leftover[0]!r} and possibly more were never loaded"
        )
