"""Named weight tensors -> SGLang flattened-tensor buckets -> `update_weights_from_tensor` kwargs.

SGLang's receiver (`load_format="flattened_bucket"`) deserializes, in each TP rank, the
entry of `named_tensors` at its rank: a dict `{"flattened_tensor": 1-D tensor, "metadata":
[FlattenedTensorMetadata(name, shape, dtype, start_idx, end_idx, numel), ...]}`, and
rebuilds tensor k as `flattened_tensor[start_idx:end_idx]` reshaped to `shape` (releases
from late 2025 insert `.view(dtype)` for byte buffers, older ones `.to(dtype)`).

A bucket here holds tensors of one dtype flattened in that dtype, with element offsets, so
both receivers rebuild it bit-exactly (the view/cast is then a no-op). Tensors of several
dtypes go to separate buckets; a bucket is sent when the next tensor of its dtype would
push it past the byte budget, and a tensor larger than the budget travels alone.
Each TP rank gets its own serialization of the same bucket (SGLang's CUDA-IPC reference
counting expects one deserialization per serialized handle).

Tied word embeddings: SGLang's loaders of a tied model skip `lm_head.weight` (the head is
the embedding); `update_requests` sends the shared tensor once and checks the tie
(`rl.core.weight_sync.ties.TieCheck`: a different `lm_head.weight` for a tied model, or
none ever for an untied one, is an error rather than a stale head).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from rl.core.weight_sync.ties import TieCheck

LOAD_FORMAT = "flattened_bucket"


@dataclass(frozen=True)
class TensorSlot:
    """Where one named tensor lies in a bucket's flat tensor (element offsets, same dtype)."""

    name: str
    shape: torch.Size
    dtype: torch.dtype
    start_idx: int
    end_idx: int
    numel: int


@dataclass
class FlatBucket:
    """`flattened_tensor` [sum of numels] (one dtype) and the slot of each tensor in it."""

    flattened_tensor: torch.Tensor
    slots: list[TensorSlot]

    @property
    def nbytes(self) -> int:
        return self.flattened_tensor.numel() * self.flattened_tensor.element_size()


def flatten(named_tensors: list[tuple[str, torch.Tensor]]) -> FlatBucket:
    """Concatenate same-dtype tensors into one 1-D tensor on the first tensor's device."""
    if not named_tensors:
        raise ValueError("cannot flatten an empty bucket")
    dtypes = {tensor.dtype for _, tensor in named_tensors}
    if len(dtypes) != 1:
        raise ValueError(f"a bucket holds one dtype, got {sorted(map(str, dtypes))}")
    slots, start = [], 0
    for name, tensor in named_tensors:
        numel = tensor.numel()
        slots.append(TensorSlot(name, tensor.shape, tensor.dtype, start, start + numel, numel))
        start += numel
    flat = torch.cat([tensor.detach().reshape(-1) for _, tensor in named_tensors])
    return FlatBucket(flat, slots)


def buckets(
    named_tensors: Iterable[tuple[str, torch.Tensor]], bucket_bytes: int
) -> Iterator[FlatBucket]:
    """Group a (lazy) stream of named tensors into buckets of at most `bucket_bytes` each.

    One open bucket per dtype; names keep their order within a dtype. Only the open buckets
    are held in memory, so a trainer's bucket-by-bucket export stays bounded.
    """
    if bucket_bytes <= 0:
        raise ValueError(f"bucket_bytes must be > 0, got {bucket_bytes}")
    open_buckets: dict[torch.dtype, tuple[list[tuple[str, torch.Tensor]], int]] = {}
    for name, tensor in named_tensors:
        size = tensor.numel() * tensor.element_size()
        pending, used = open_buckets.get(tensor.dtype, ([], 0))
        if pending and used + size > bucket_bytes:
            yield flatten(pending)
            pending, used = [], 0
        pending.append((name, tensor))
        open_buckets[tensor.dtype] = (pending, used + size)
    for pending, _ in open_buckets.values():
        if pending:
            yield flatten(pending)


def update_request(
    bucket: FlatBucket,
    tp_size: int,
    serialize: Callable[[Any], Any],
    metadata_type: Callable[..., Any] = TensorSlot,
    flush_cache: bool = False,
) -> dict[str, Any]:
    """The keyword arguments of SGLang's `Engine.update_weights_from_tensor` for `bucket`.

    `serialize` is SGLang's `MultiprocessingSerializer.serialize` and `metadata_type` its
    `FlattenedTensorMetadata` (SGLang's unpickler admits only its own class); both are
    injected so this module runs without SGLang.
    """
    metadata = [
        metadata_type(
            name=slot.name,
            shape=slot.shape,
            dtype=slot.dtype,
            start_idx=slot.start_idx,
            end_idx=slot.end_idx,
            numel=slot.numel,
        )
        for slot in bucket.slots
    ]
    payload = {"flattened_tensor": bucket.flattened_tensor, "metadata": metadata}
    return {
        "named_tensors": [serialize(payload) for _ in range(tp_size)],
        "load_format": LOAD_FORMAT,
        "flush_cache": flush_cache,
    }


def update_requests(
    named_tensors: Iterable[tuple[str, torch.Tensor]],
    bucket_bytes: int,
    tp_size: int,
    serialize: Callable[[Any], Any],
    metadata_type: Callable[..., Any] = TensorSlot,
    ties: TieCheck | None = None,
) -> Iterator[dict[str, Any]]:
    """`update_request` of each bucket of the stream, lazily (one bucket alive at a time
    besides the open ones), the stream checked by `ties` (the receiving model's) first."""
    stream = named_tensors if ties is None else ties.stream(named_tensors)
    for bucket in buckets(stream, bucket_bytes):
        yield update_request(bucket, tp_size, serialize, metadata_type, flush_cache=False)


def raise_on_failure(result: Any) -> None:
    """Raise RuntimeError when SGLang answers an update with failure.

    Releases answer `(success, message)`, a dict with "success", or an object with
    `.success`; None (no answer) counts as success.
    """
    if isinstance(result, tuple):
        success = bool(result[0]) if result else True
        message = result[1] if len(result) > 1 else ""
    elif isinstance(result, dict):
        success, message = result.get("success", True), result.get("message", "")
    else:
        success = getattr(result, "success", True)
        message = getattr(result, "message", "") or getattr(result, "error_message", "")
    if success is False:
        raise RuntimeError(f"SGLang failed to load a weight bucket: {message}")
