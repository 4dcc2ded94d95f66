"""`WeightSender`: the trainer side of weight sync, with state across syncs (delta mode)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator

import torch

from rl.core.engines import RolloutEngine
from rl.core.weight_sync.delta import ContentFingerprints
from rl.core.weight_sync.entries import checked_entries, nbytes
from rl.core.weight_sync.groups import WeightGroup, each_tensor
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
    delta.py for the exact-enough check), decided per group of weights the
    engine loads together (`rollout.weight_group`, or `weight_group` here when
    the receivers live in other processes; groups.py). `transport`: the carrier,
    by default in-process views handed to `rollout.update_weights`.
    """

    def __init__(
        self,
        bucket_bytes: int = DEFAULT_BUCKET_BYTES,
        delta: bool = False,
        transport: Transport | None = None,
        weight_group: WeightGroup | None = None,
    ) -> None:
        if bucket_bytes <= 0:
            raise ValueError(f"bucket_bytes must be positive, got {bucket_bytes}")
        self.bucket_bytes = bucket_bytes
        self.weight_group = weight_group
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
        # a minimal receiver (a test double) may not say: then every tensor is its own group
        engine_group: WeightGroup | None = getattr(rollout, "weight_group", None)
        group_of = self.weight_group or engine_group or each_tensor
        entries = self._offered(checked_entries(named_tensors), stats, group_of)
        try:
            self.transport.send(entries, rollout, Packer(self.bucket_bytes, stats, self.pool))
        except BaseException:
            if self.fingerprints is not None:
                self.fingerprints.clear()  # unknown what arrived: send everything next time
            raise
        return stats.metrics()

    def _offered(
        self, entries: Iterator[NamedTensor], stats: SyncStats, group_of: WeightGroup
    ) -> Iterator[NamedTensor]:
        """The entries to send: all of them, or in delta mode each run of consecutive
        tensors of one group, whole, when any of them changed (exporters stream a
        module's tensors together, as a state dict does)."""
        run: list[NamedTensor] = []
        run_group, run_changed = None, False
        for name, tensor in entries:
            stats.tensors += 1
            stats.bytes += nbytes(tensor)
            if self.fingerprints is None:
                yield name, tensor
                continue
            group = group_of(name)
            if group != run_group:
                yield from _send_if(run, run_changed, stats)
                run, run_group, run_changed = [], group, False
            start = time.perf_counter()
            run_changed |= self.fingerprints.changed(name, tensor)
            stats.check_s += time.perf_counter() - start
            run.append((name, tensor))
        yield from _send_if(run, run_changed, stats)


def _send_if(run: list[NamedTensor], changed: bool, stats: SyncStats) -> list[NamedTensor]:
    if changed:
        return run
    stats.skipped_tensors += len(run)
    return []


def sync_weights(
    named_tensors: Iterable[tuple[str, torch.Tensor]],
    rollout: RolloutEngine,
    bucket_bytes: int = DEFAULT_BUCKET_BYTES,
) -> dict[str, float]:
    """Stateless one-shot sync (in-process, no delta); metrics as `WeightSender.sync`."""
    return WeightSender(bucket_bytes).sync(named_tensors, rollout)
