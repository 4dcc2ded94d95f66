"""`WeightSender`: the trainer side of weight sync, with state across syncs (delta mode)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator

import torch

from rl.core.engines import RolloutEngine
from rl.core.weight_sync.delta import ContentFingerprints
from rl.core.weight_sync.entries import checked_entries, nbytes
from rl.core.weight_sync.packing import NamedTensor, Packer
from rl.core.weight_sync.stats import SyncStats
from rl.core.weight_sync.transports import InProcessTransport, Transport
from rl.kernels import BucketPool

DEFAULT_BUCKET_BYTES = 256 << 20


class WeightSender:
    """Streams the trainer's weights to a rollout engine, bucket by bucket.

    `bucket_bytes`: the most bytes packed into one bucket (one dtype each; a
    larger tensor gets its own). `delta`: skip tensors whose content did not
    change since the previous sync (the first sync sends everything; see
    delta.py for the exact-enough check). `transport`: the carrier, by default
    in-process views handed to `rollout.update_weights`.
    """

    def __init__(
        self,
        bucket_bytes: int = DEFAULT_BUCKET_BYTES,
        delta: bool = False,
        transport: Transport | None = None,
    ) -> None:
        if bucket_bytes <= 0:
            raise ValueError(f"bucket_bytes must be positive, got {bucket_bytes}")
        self.bucket_bytes = bucket_bytes
        self.transport: Transport = transport if transport is not None else InProcessTransport()
        self.fingerprints = ContentFingerprints() if delta else None
        self.pool = BucketPool(max_cached_bytes=max(2 * bucket_bytes, 64 << 20))

    def sync(
        self,
        named_tensors: Iterable[tuple[str, torch.Tensor]],
        rollout: RolloutEngine | None = None,
    ) -> dict[str, float]:
        """Send `(hf_name, tensor)` pairs (any dtype, any device) in one delivery.

        Returns `weight_sync/{buckets, bytes, sent_bytes, skipped_tensors,
        pack_s, check_s}`; `bytes` counts all weights offered, `sent_bytes`
        what travelled. `rollout` may be None for a transport whose receivers
        live in other processes.
        """
        stats = SyncStats()
        entries = self._offered(checked_entries(named_tensors), stats)
        try:
            self.transport.send(entries, rollout, Packer(self.bucket_bytes, stats, self.pool))
        except BaseException:
            if self.fingerprints is not None:
                self.fingerprints.clear()  # unknown what arrived: send everything next time
            raise
        return stats.metrics()

    def _offered(self, entries: Iterator[NamedTensor], stats: SyncStats) -> Iterator[NamedTensor]:
        for name, tensor in entries:
            stats.tensors += 1
            stats.bytes += nbytes(tensor)
            if self.fingerprints is not None:
                start = time.perf_counter()
                changed = self.fingerprints.changed(name, tensor)
                stats.check_s += time.perf_counter() - start
                if not changed:
                    stats.skipped_tensors += 1
                    continue
            yield name, tensor


def sync_weights(
    named_tensors: Iterable[tuple[str, torch.Tensor]],
    rollout: RolloutEngine,
    bucket_bytes: int = DEFAULT_BUCKET_BYTES,
) -> dict[str, float]:
    """Stateless one-shot sync (in-process, no delta); metrics as `WeightSender.sync`."""
    return WeightSender(bucket_bytes).sync(named_tensors, rollout)
