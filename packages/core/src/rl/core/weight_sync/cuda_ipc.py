"""CUDA IPC carrier for colocated processes (trainer and rollout on the same GPUs).

The sender packs each bucket on its GPU and sends, over a byte channel (a
`multiprocessing.Connection`: `send_bytes`/`recv_bytes`), one `IpcMessage`
per bucket: the plan item (layout or raw entry) and the CUDA IPC handle from
`torch.multiprocessing.reductions.reduce_tensor`. The receiver opens the
handle (no copy: the same device memory), hands views to its engine in one
lazy `update_weights` call, then acknowledges; the sender keeps every bucket
of the sync alive until that acknowledgement, since the engine may hold views
until a fused module is complete. Cost: one packed copy of the sent weights in
device memory for the duration of a sync.

Messages are decoded by an unpickler that only builds the few torch and rl
types a handle and a plan contain: a message cannot run arbitrary code.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch.multiprocessing.reductions import rebuild_cuda_tensor, reduce_tensor

from rl.core.engines import RolloutEngine
from rl.core.weight_sync.packing import NamedTensor, Packer, item_views
from rl.core.weight_sync.transports import check_drained
from rl.kernels import PlanItem

ACK = b"weights-loaded"


class ByteChannel(Protocol):
    def send_bytes(self, data: bytes) -> None: ...

    def recv_bytes(self) -> bytes: ...


@dataclass(frozen=True)
class IpcMessage:
    """One bucket (or raw tensor) as a plan item plus the args of `rebuild_cuda_tensor`.

    `item is None` ends a sync.
    """

    item: PlanItem | None
    handle: tuple[Any, ...] | None = None

    def to_bytes(self) -> bytes:
        return pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)

    @staticmethod
    def from_bytes(data: bytes) -> IpcMessage:
        message = _RestrictedUnpickler(io.BytesIO(data)).load()
        if not isinstance(message, IpcMessage):
            raise TypeError(f"expected an IpcMessage, got {type(message).__name__}")
        return message


def cuda_handle(tensor: torch.Tensor, what: str) -> tuple[Any, ...]:
    """The IPC handle of a CUDA tensor: the args `rebuild_cuda_tensor` takes."""
    if tensor.device.type != "cuda":
        raise ValueError(
            f"CUDA IPC shares device memory, but {what} is on {tensor.device}: "
            "export the weights on the GPU (or use the in-process or broadcast transport)"
        )
    rebuild, args = reduce_tensor(tensor)
    if rebuild is not rebuild_cuda_tensor:
        raise ValueError(f"{what} did not reduce to a CUDA IPC handle ({rebuild.__name__})")
    return tuple(args)


class CudaIpcSender:
    """Sender transport: `WeightSender(transport=CudaIpcSender(connection))`."""

    def __init__(self, channel: ByteChannel) -> None:
        self.channel = channel

    def send(
        self,
        entries: Iterator[NamedTensor],
        rollout: RolloutEngine | None,
        packer: Packer,
    ) -> None:
        alive: list[torch.Tensor] = []  # shared memory must outlive the receiver's views
        for packed in packer.stream(entries):
            what = f"the bucket holding {packed.views()[0][0]!r}" if packed.tensor.numel() else ""
            handle = cuda_handle(packed.tensor, what or "an empty bucket")
            alive.append(packed.tensor)
            self.channel.send_bytes(IpcMessage(packed.plan, handle).to_bytes())
        self.channel.send_bytes(IpcMessage(None).to_bytes())
        reply = self.channel.recv_bytes()
        if reply != ACK:
            raise RuntimeError(f"rollout process did not confirm the weight load: {reply[:200]!r}")


class CudaIpcReceiver:
    """Rollout-process side: `CudaIpcReceiver(connection).receive(engine)` once per sync."""

    def __init__(self, channel: ByteChannel) -> None:
        self.channel = channel

    def receive(self, rollout: RolloutEngine) -> None:
        stream = self._views()
        try:
            rollout.update_weights(stream)
            check_drained(stream, type(rollout).__name__)
        except BaseException as error:
            for _ in stream:
                pass
            self.channel.send_bytes(f"error: {error!r}".encode())
            raise
        self.channel.send_bytes(ACK)

    def _views(self) -> Iterator[NamedTensor]:
        while True:
            message = IpcMessage.from_bytes(self.channel.recv_bytes())
            if message.item is None:
                return
            assert message.handle is not None
            yield from item_views(message.item, rebuild_cuda_tensor(*message.handle))


_ALLOWED = {
    ("rl.core.weight_sync.cuda_ipc", "IpcMessage"),
    ("rl.kernels.buckets", "BucketLayout"),
    ("rl.kernels.buckets", "BucketEntry"),
    ("rl.kernels.bucket_plan", "RawEntry"),
    ("torch", "Tensor"),
    ("torch", "Size"),
    ("torch", "device"),
    ("torch.storage", "TypedStorage"),
    ("torch.storage", "UntypedStorage"),
    ("torch", "UntypedStorage"),
    ("torch", "TypedStorage"),
    ("torch._utils", "_rebuild_tensor_v2"),
}


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        if module == "torch" and name.endswith("Storage"):  # legacy typed storages
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"weight-sync message may not build {module}.{name}")
