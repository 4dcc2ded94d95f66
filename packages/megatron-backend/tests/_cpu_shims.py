"""Test-only: megatron-core on a CPU-only torch build (never imported by the package).

megatron-core asks CUDA for the current device and RNG state even with CPU
initialisation, creates some tensors with `device="cuda"` (causal masks, the optimizer's
loss scale, pipeline buffers) and asserts `torch.cuda.FloatTensor` gradients when it
clips them. `install()` points all of that at the CPU for this process: CUDA device
requests become CPU ones, the CUDA RNG is the CPU RNG, and a CPU float tensor calls
itself a CUDA one when asked by name. Collectives then run on gloo.
"""

from __future__ import annotations

import contextlib
import functools

import torch

FACTORIES = ("tensor", "ones", "zeros", "empty", "full", "arange", "randn", "rand")


def _cpu(device):
    if isinstance(device, int) or device == "cuda":
        return torch.device("cpu")
    if isinstance(device, str) and device.startswith("cuda"):
        return torch.device("cpu")
    if isinstance(device, torch.device) and device.type == "cuda":
        return torch.device("cpu")
    return device


def _on_cpu(factory):
    @functools.wraps(factory)
    def wrapped(*args, **kwargs):
        if "device" in kwargs:
            kwargs["device"] = _cpu(kwargs["device"])
        return factory(*args, **kwargs)

    return wrapped


class _Stream:
    """CUDA streams and events on CPU: everything is already in order."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def __getattr__(self, name):
        return lambda *args, **kwargs: _Stream()


def _moe_splits_as_numpy() -> None:
    """The all-to-all dispatcher turns its split sizes into numpy when it copies them
    from the GPU; on CPU there is no copy, and torch's all_to_all refuses a tensor."""
    from megatron.core.transformer.moe import token_dispatcher

    def move(tensor, as_numpy=False, record_stream=False):
        return tensor.numpy() if as_numpy and torch.is_tensor(tensor) else tensor

    token_dispatcher.maybe_move_tensor_to_cpu = move


@functools.cache
def install() -> None:
    import megatron.core.tensor_parallel.random as mrandom

    torch.cuda.current_device = lambda: torch.device("cpu")
    torch.cuda.manual_seed = torch.manual_seed
    torch.cuda.get_rng_state = lambda *a, **k: torch.get_rng_state()
    torch.cuda.set_rng_state = lambda state, *a, **k: torch.set_rng_state(state)
    torch.cuda.synchronize = lambda *a, **k: None
    torch.cuda.Stream = torch.cuda.Event = _Stream
    torch.cuda.current_stream = lambda *a, **k: _Stream()
    torch.cuda.stream = lambda *a, **k: contextlib.nullcontext()
    mrandom._get_cuda_rng_state = lambda *a, **k: torch.get_rng_state()
    mrandom._set_cuda_rng_state = lambda state, *a, **k: torch.set_rng_state(state)
    for name in FACTORIES:
        setattr(torch, name, _on_cpu(getattr(torch, name)))
    to, type_ = torch.Tensor.to, torch.Tensor.type

    def tensor_to(self, *args, **kwargs):
        args = tuple(_cpu(a) if isinstance(a, (str, torch.device)) else a for a in args)
        if "device" in kwargs:
            kwargs["device"] = _cpu(kwargs["device"])
        return to(self, *args, **kwargs)

    def tensor_type(self, *args, **kwargs):
        if args or kwargs:
            return type_(self, *args, **kwargs)
        return type_(self).replace("torch.", "torch.cuda.", 1)

    _moe_splits_as_numpy()
    torch.Tensor.to = tensor_to
    torch.Tensor.cuda = lambda self, *a, **k: self
    torch.Tensor.type = tensor_type
