"""Checking the weights offered to a sync: clear errors that name the tensor."""

from __future__ import annotations

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
    """
    seen: set[str] = set()
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
        yield name, tensor.detach().contiguous()


def nbytes(tensor: torch.Tensor) -> int:
    """Bytes of the tensor's elements (not of its storage)."""
    return tensor.numel() * tensor.element_size()
