"""Seeding and the RNG state that checkpoints carry, so resumed runs are bit-identical.

numpy's legacy global generator is captured on purpose: user reward code may use it.
The state is made of tensors and plain Python values only, so checkpoints load with
`torch.load(weights_only=True)` (no pickled code).
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002
    torch.manual_seed(seed)


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": _numpy_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    kind, keys, position, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), position, has_gauss, cached))  # noqa: NPY002
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _numpy_state() -> tuple[str, torch.Tensor, int, int, float]:
    kind, keys, position, has_gauss, cached = np.random.get_state(legacy=True)  # noqa: NPY002
    return (
        str(kind),
        torch.from_numpy(np.asarray(keys, dtype=np.int64)),
        int(position),
        int(has_gauss),
        float(cached),
    )


def prompt_seeds(*key: int | str, count: int) -> tuple[int, ...]:
    """`count` per-prompt sampling seeds (`SamplingParams.prompt_seeds`) from `key` (the
    run's seeds, the phase, the step) and each prompt's position in the step's batch: a
    pure function of them, so the same prompt of the same step samples the same responses
    whichever replica or batch it lands in. 62-bit values: `seed + j` for the n samples
    stays a valid 64-bit generator seed."""
    prefix = "/".join(str(part) for part in key)
    return tuple(
        int.from_bytes(hashlib.blake2b(f"{prefix}/{i}".encode(), digest_size=8).digest()) >> 2
        for i in range(count)
    )
