"""Free a colocated engine's device memory between phases and bring it back (verl's
`megatron.param_offload` / `grad_offload` / `optimizer_offload`).

megatron-core's parameters and gradients are views into a few flat buffers (DDP's
`grad_data`, and `param_data` under the distributed optimizer), and its optimizer keeps
references to those views. Moving tensors (`t.data = t.data.cpu()`) would cut the views
loose, so each *storage* is released instead: its bytes go to a host copy (pinned on
CUDA), the storage is resized to 0 (the memory is freed; every view stays a valid
object), and onload resizes it back and copies the bytes in. Gradients are not copied:
they are zeroed at the start of every step, so onload only reallocates them.

Which storages belong to what: parameters are the model's parameter storages (one per
buffer under the distributed optimizer), gradients DDP's grad buffers, and optimizer
state everything the optimizer holds (Adam moments, fp32 master weights) that is not a
view of those two (the distributed optimizer's fp32 shards are views of the parameters).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from rl.megatron.config import MegatronConfig


def _unique(tensors: Iterable[torch.Tensor]) -> dict[int, torch.UntypedStorage]:
    """Distinct storages of `tensors` by address (several views share one)."""
    out: dict[int, torch.UntypedStorage] = {}
    for tensor in tensors:
        storage = tensor.untyped_storage()
        out.setdefault(storage.data_ptr() or id(storage), storage)
    return out


def parameter_storages(chunks: Iterable[torch.nn.Module]) -> dict[int, torch.UntypedStorage]:
    return _unique(p for chunk in chunks for p in chunk.parameters())


def gradient_storages(chunks: Iterable[torch.nn.Module]) -> dict[int, torch.UntypedStorage]:
    """DDP's flat gradient buffers (a reference engine, without DDP, has none)."""
    buffers = [
        buffer
        for chunk in chunks
        if hasattr(chunk, "expert_parallel_buffers")  # DDP (`buffers` is also nn.Module's)
        for buffer in chunk.buffers + chunk.expert_parallel_buffers
    ]
    return _unique(buffer.grad_data for buffer in buffers if buffer.grad_data is not None)


def _torch_optimizers(optimizer: Any) -> Iterator[torch.optim.Optimizer]:
    for inner in getattr(optimizer, "chained_optimizers", [optimizer]):
        if getattr(inner, "optimizer", None) is not None:
            yield inner.optimizer


def optimizer_storages(
    optimizer: Any, exclude: Iterable[int] = ()
) -> dict[int, torch.UntypedStorage]:
    """What the optimizer alone holds: its state's tensors and the parameters it updates
    (master weights), less the storages in `exclude` (the model's parameters and grads)."""
    tensors: list[torch.Tensor] = []
    for inner in _torch_optimizers(optimizer):
        for group in inner.param_groups:
            tensors.extend(p for p in group["params"] if isinstance(p, torch.Tensor))
        for state in inner.state.values():
            tensors.extend(v for v in state.values() if isinstance(v, torch.Tensor) and v.numel())
    excluded = set(exclude)
    return {key: s for key, s in _unique(tensors).items() if key not in excluded}


@dataclass
class Offloaded:
    """Storages whose device memory is released; `restore()` brings them back."""

    storages: list[tuple[torch.UntypedStorage, int, torch.UntypedStorage | None]] = field(
        default_factory=list
    )

    @classmethod
    def release(
        cls, storages: Iterable[torch.UntypedStorage], keep_contents: bool = True
    ) -> Offloaded:
        """Free each storage's memory, first copying its bytes to the host if
        `keep_contents` (without, onload gives zeros)."""
        out = cls()
        for storage in storages:
            size = storage.nbytes()
            if size == 0:
                continue  # already released (shared with something offloaded earlier)
            host = None
            if keep_contents:
                pin = storage.device.type == "cuda"
                host = torch.empty(size, dtype=torch.uint8, pin_memory=pin).untyped_storage()
                host.copy_(storage, non_blocking=pin)
            out.storages.append((storage, size, host))
        if any(s.device.type == "cuda" for s, _, _ in out.storages):
            torch.cuda.synchronize()  # the copies must land before the memory goes
        for storage, _, _ in out.storages:
            storage.resize_(0)
        return out

    def restore(self) -> None:
        for storage, size, host in self.storages:
            storage.resize_(size)
            if host is None:
                storage.fill_(0)
            else:
                storage.copy_(host, non_blocking=host.is_pinned())
        if any(s.device.type == "cuda" for s, _, _ in self.storages):
            torch.cuda.synchronize()
        self.storages = []

    @property
    def nbytes(self) -> int:
        return sum(size for _, size, _ in self.storages)


class Offloader:
    """What `megatron.param_offload` / `grad_offload` / `optimizer_offload` release from an
    engine's `chunks` and `optimizer` (None for the reference) between phases."""

    def __init__(
        self,
        chunks: list[torch.nn.Module],
        optimizer: Any,
        m: MegatronConfig,
        device: torch.device,
    ) -> None:
        self.chunks, self.optimizer, self.m, self.device = chunks, optimizer, m, device
        self._offloaded: list[Offloaded] = []  # what `offload` released, in order

    @property
    def offloads(self) -> bool:
        """Whether the engine steps aside for colocated roles (`megatron.*_offload`)."""
        m = self.m
        return m.param_offload or (
            self.optimizer is not None and (m.grad_offload or m.optimizer_offload)
        )

    def offload(self) -> None:
        """Release the device memory the offload keys name (weights and optimizer state
        wait on the host, gradients are dropped); a second call does nothing."""
        if self._offloaded:
            return
        params = parameter_storages(self.chunks)
        grads = gradient_storages(self.chunks)
        if self.optimizer is not None and self.m.optimizer_offload:
            owned = optimizer_storages(self.optimizer, exclude=[*params, *grads])
            self._offloaded.append(Offloaded.release(owned.values()))
        if self.m.grad_offload:
            self._offloaded.append(Offloaded.release(grads.values(), keep_contents=False))
        if self.m.param_offload:
            self._offloaded.append(Offloaded.release(params.values()))
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def onload(self) -> None:
        """Bring back what `offload` released."""
        while self._offloaded:
            self._offloaded.pop().restore()
