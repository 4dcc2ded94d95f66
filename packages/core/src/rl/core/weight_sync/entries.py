"""Checking the weights offered to a sync: clear errors that name the tensor."""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator

import torch


def checked_entries(
    named_tensors: Iterable[tuple[str, torch.Tensor]],
) -> Iterator[tuple[str, torch.Tensor]]:
    """Yield `(name, tensor)` detached and contiguous, lazily, in the input order.

    Raises TypeError for a name that is not a str or a value that is not a
    tensor, and ValueError for a name offered twice in one sync (the receiver
    would load one of them silently). A non-contiguous tensor (a transposed
    view) is made contiguous here; tensors of any dtype pass (integer and bool
    ones travel raw, outside the buckets).

    A tensor offered again under another name while the first is still alive, with the
    same memory, shape, strides and dtype (a tied weight: `lm_head.weight` of a tied
    model's `state_dict()`), is the same weight: it is sent once, under its first name.
    A tensor the exporter has already dropped cannot be proved the same (its memory may
    have been reused) and is sent; exporters skip tied names themselves (`ties.py`).
    """
    seen: set[str] = set()
    memory: dict[tuple[object, ...], weakref.ref[torch.Tensor]] = {}
    for index, pair in enumerate(named_tensors):
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise TypeError(f"weight #{index} is {type(pair).__name__}, not a (name, tensor) pair")
        name, tensor = pair
        if not isinstance(name, str):
            raise TypeError(f"weight #{index} has name {name!r} of type {type(name).__name__}")
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"weight {name!r} is a {type(tensor).__name__}, not a torch.Tensor")
        if name in seen:
            raise ValueError(f"weight {name!r} is offered twice in one sync")
        seen.add(name)
        if tensor.numel():
            key = (tensor.device, tensor.dtype, tensor.data_ptr(), tensor.shape, tensor.stride())
            first = memory.get(key)
            if first is not None and first() is not None:
                continue  # alive and the same memory: a tied alias
            memory[key] = weakref.ref(tensor)
        yield name, tensor.detach().contiguous()


def nbytes(tensor: torch.Tensor) -> int:
    """Bytes of the tensor's elements (not of its storage)."""
    return tensor.numel() * tensor.element_size()
