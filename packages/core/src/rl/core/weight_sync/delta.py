"""Delta sync: skip a weight whose content did not change since the last sync.

The check must never call a changed tensor unchanged, so it is exact or
cryptographically strong, never a sum or a sample:

- CPU tensors: a 256-bit digest of the raw bytes (BLAKE3 when the `blake3`
  module is importable, multi-threaded ~4-6 GB/s here; else SHA-256 from
  hashlib, ~1.8 GB/s). A collision needs ~2^128 work: no silent skip in
  practice. Memory cost: 32 bytes per tensor.
- Device tensors: a kept copy on the device, compared bit for bit (exact;
  costs one copy of the weights in device memory, and a read of 2x the bytes,
  i.e. microseconds per MB at TB/s). Hashing there would need a copy to host.

Shape and dtype are part of the fingerprint. Fingerprints are recorded while
the sync runs; the sender forgets them all when a sync fails, so the next sync
sends everything again.
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch

_blake3: Any
try:
    import blake3 as _blake3
except ImportError:  # optional: a faster strong hash (a vLLM dependency)
    _blake3 = None


def content_digest(tensor: torch.Tensor) -> bytes:
    """256-bit digest of a contiguous CPU tensor's bytes (any dtype, any shape)."""
    if tensor.device.type != "cpu" or not tensor.is_contiguous():
        raise ValueError("content_digest takes a contiguous CPU tensor")
    data = memoryview(tensor.reshape(-1).view(torch.uint8).numpy().data)
    if _blake3 is not None:
        threads = _blake3.blake3.AUTO if len(data) >= 1 << 20 else 1
        return bytes(_blake3.blake3(data, max_threads=threads).digest())
    return hashlib.sha256(data).digest()


def hash_name() -> str:
    """The digest used on CPU tensors in this process."""
    return "blake3" if _blake3 is not None else "sha256"


class ContentFingerprints:
    """Per weight name, what its content was at the last sync."""

    def __init__(self) -> None:
        self._digests: dict[str, tuple[Any, bytes]] = {}
        self._copies: dict[str, torch.Tensor] = {}

    def changed(self, name: str, tensor: torch.Tensor) -> bool:
        """True when `tensor` differs from what `name` held at the last sync; records it."""
        key = (tuple(tensor.shape), tensor.dtype)
        if tensor.device.type == "cpu":
            self._copies.pop(name, None)
            fingerprint = (key, content_digest(tensor))
            same = self._digests.get(name) == fingerprint
            self._digests[name] = fingerprint
            return not same
        self._digests.pop(name, None)
        kept = self._copies.get(name)
        if kept is not None and kept.shape == tensor.shape and kept.dtype == tensor.dtype:
            if kept.device == tensor.device and _bits_equal(kept, tensor):
                return False
            kept.copy_(tensor)
        else:
            self._copies[name] = tensor.detach().clone()
        return True

    def clear(self) -> None:
        self._digests.clear()
        self._copies.clear()

    def __len__(self) -> int:
        return len(self._digests) + len(self._copies)


def _bits_equal(first: torch.Tensor, second: torch.Tensor) -> bool:
    # Compare bits, not values: NaN != NaN and -0.0 == 0.0 would both mislead.
    return torch.equal(first.reshape(-1).view(torch.uint8), second.reshape(-1).view(torch.uint8))
