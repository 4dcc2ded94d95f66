"""Counters of one weight sync, reported as `weight_sync/*` metrics."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SyncStats:
    """What one sync did; `metrics()` names them for the trainer's log.

    `bytes` counts every weight offered, `sent_bytes` only what travelled
    (delta mode skips unchanged tensors); `pack_s` is host wall time spent
    packing buckets (kernel launches on GPU), `check_s` the delta check.
    """

    buckets: int = 0
    raw_tensors: int = 0
    tensors: int = 0
    bytes: int = 0
    sent_bytes: int = 0
    skipped_tensors: int = 0
    pack_s: float = 0.0
    check_s: float = 0.0

    def metrics(self) -> dict[str, float]:
        return {
            "weight_sync/buckets": float(self.buckets),
            "weight_sync/bytes": float(self.bytes),
            "weight_sync/sent_bytes": float(self.sent_bytes),
            "weight_sync/skipped_tensors": float(self.skipped_tensors),
            "weight_sync/pack_s": self.pack_s,
            "weight_sync/check_s": self.check_s,
        }
