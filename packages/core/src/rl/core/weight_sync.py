"""Trainer -> rollout weight sync through resharding buckets (rl.kernels).

Weights stream from `TrainEngine.export_weights()` in Hugging Face names;
consecutive tensors of one dtype are packed into buckets of at most
`bucket_bytes` (one kernel launch each on GPU) and handed to the rollout
engine as zero-copy views of the bucket.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from rl.core.engines import RolloutEngine
from rl.kernels import pack_bucket, unpack_bucket
from rl.kernels._dtypes import SUPPORTED_DTYPES

DEFAULT_BUCKET_BYTES = 256 << 20


def sync_weights(
    named_tensors: Iterable[tuple[str, torch.Tensor]],
    rollout: RolloutEngine,
    bucket_bytes: int = DEFAULT_BUCKET_BYTES,
) -> dict[str, float]:
    """Send every weight to `rollout`; returns {weight_sync/buckets, weight_sync/bytes}."""
    pending: list[tuple[str, torch.Tensor]] = []
    pending_bytes, buckets, total = 0, 0, 0

    def flush() -> None:
        nonlocal pending, pending_bytes, buckets
        if pending:
            bucket, layout = pack_bucket(pending, dtype=pending[0][1].dtype)
            rollout.update_weights(iter(unpack_bucket(bucket, layout)))
            buckets += 1
        pending, pending_bytes = [], 0

    for name, tensor in named_tensors:
        size = tensor.numel() * tensor.element_size()
        if tensor.dtype not in SUPPORTED_DTYPES:  # e.g. integer buffers: sent as they are
            flush()
            rollout.update_weights(iter([(name, tensor)]))
            total += size
            continue
        if pending and (pending_bytes + size > bucket_bytes or tensor.dtype != pending[0][1].dtype):
            flush()
        pending.append((name, tensor.detach()))
        pending_bytes += size
        total += size
    flush()
    return {"weight_sync/buckets": float(buckets), "weight_sync/bytes": float(total)}
