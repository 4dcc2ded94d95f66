"""megatron on CPU: a supported debug mode, for `trainer.device=cpu` only.

What it is for: checking a megatron config end to end (layout, model, weights, loss,
checkpoints, the whole `rl train` loop) on a laptop or a CI runner before taking it to a
cluster. It is slow (a CPU, gloo collectives, no fused kernels) and never a way to
train a real model.

Why it is needed: megatron-core assumes a GPU even with `use_cpu_initialization`. It
asks `torch.cuda` for the current device, RNG state and streams, makes a few tensors
with `device="cuda"`, and asserts that gradients and parameters call themselves
`torch.cuda.*Tensor`. On a CPU-only torch each of those raises "Torch not compiled
with CUDA enabled". The patches below answer exactly those calls on the CPU. Each
one answers only when megatron-core itself is the caller (the calling frame's module is
`megatron.*`); every other caller in the process (this package, torch, transformers)
sees torch as it was. Collectives then run on gloo.

`MegatronTrainEngine` installs the mode itself when it is built with device `cpu`, in
every process that builds one (the driver, each Ray worker, each torchrun rank); with
device `cuda` nothing is installed and nothing changes. What runs on CPU and what does
not is listed in the package README ("CPU debug mode").
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
from collections.abc import Callable
from typing import Any

import torch

log = logging.getLogger(__name__)

WARNING = (
    "megatron on CPU: a debug mode, slow (gloo, no fused kernels), for checking a "
    "megatron config end to end before a cluster; use trainer.device=cuda to train"
)

Patch = tuple[Any, str, Any]  # (owner, attribute, replacement)


def wanted(device: str | torch.device) -> bool:
    """Whether an engine on `device` needs the mode: on a CPU only, never on CUDA."""
    return torch.device(device).type == "cpu"


def install_for(device: str | torch.device) -> bool:
    """Install the mode if an engine on `device` needs it (`wanted`); whether it did."""
    if not wanted(device):
        return False
    install()
    return True


@functools.cache
def install() -> None:
    """Apply `patches()` for the rest of this process (once; later calls do nothing) and
    log the one warning line (on rank 0 where torch.distributed is up)."""
    for owner, name, replacement in patches():
        setattr(owner, name, replacement)
    import torch.distributed as dist

    if not dist.is_initialized() or dist.get_rank() == 0:
        log.warning(WARNING)


def patches() -> list[Patch]:
    """What the mode changes, as (owner, attribute, replacement); `install` sets them,
    a test may set them reversibly (`pytest.MonkeyPatch.setattr`)."""
    return [*_cuda_queries(), *_rng_tracker(), *_cuda_tensors(), *_moe_dispatcher()]


# --- who is asking ----------------------------------------------------------------------


def _from_megatron(depth: int = 2) -> bool:
    """Whether the frame `depth` levels up (the caller of the patched function that calls
    this) runs megatron-core's code."""
    return sys._getframe(depth).f_globals.get("__name__", "").startswith("megatron.")


def _for_megatron(original: Callable, on_cpu: Callable) -> Callable:
    """`original`, except that megatron-core's calls get `on_cpu`'s answer."""

    @functools.wraps(original)
    def answer(*args: Any, **kwargs: Any) -> Any:
        if _from_megatron():
            return on_cpu(*args, **kwargs)
        return original(*args, **kwargs)

    return answer


def _is_cuda(device: Any) -> bool:
    if isinstance(device, torch.device):
        return device.type == "cuda"
    if isinstance(device, str):
        return device.startswith("cuda")
    return isinstance(device, int) and not isinstance(device, bool)


class _NoStream:
    """A CUDA stream or event on CPU: work is already in order, so every method
    (`wait_stream`, `record_event`, `synchronize`, ...) does nothing."""

    def __getattr__(self, name: str) -> Callable[..., _NoStream]:
        return lambda *args, **kwargs: _NoStream()


# --- the patches ------------------------------------------------------------------------


def _cuda_queries() -> list[Patch]:
    """`torch.cuda.current_device()`: megatron puts gradient buffers, rotary frequencies,
    TP and pipeline exchange buffers, the MoE router's state and the checkpoint writer's
    failure flag there; the CPU. `torch.cuda.synchronize()` (pipeline send/recv, the
    checkpoint writer after its copies): nothing to wait for. `torch.cuda.current_stream()`
    and `torch.cuda.stream(...)` (the MoE all-to-all dispatcher's side stream): no
    streams, nothing to overlap."""
    cuda = torch.cuda
    answers: dict[str, Callable[..., Any]] = {
        "current_device": lambda: torch.device("cpu"),
        "synchronize": lambda *args, **kwargs: None,
        "current_stream": lambda *args, **kwargs: _NoStream(),
        "stream": lambda *args, **kwargs: contextlib.nullcontext(),
    }
    return [
        (cuda, name, _for_megatron(getattr(cuda, name), on_cpu)) for name, on_cpu in answers.items()
    ]


def _rng_tracker() -> list[Patch]:
    """megatron's RNG tracker (`model_parallel_cuda_manual_seed`, the TP-region forks
    around dropout and initialisation) seeds, saves and restores the CUDA generator
    (`torch.cuda.manual_seed` / `get_rng_state` / `set_rng_state`, and its own
    `_get_cuda_rng_state` / `_set_cuda_rng_state`): the CPU generator stands in for it."""
    import megatron.core.tensor_parallel.random as mrandom

    def get_state(*args: Any, **kwargs: Any) -> torch.Tensor:
        return torch.get_rng_state()

    def set_state(state: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        torch.set_rng_state(state)

    cuda = torch.cuda
    return [
        (cuda, "manual_seed", _for_megatron(cuda.manual_seed, torch.manual_seed)),
        (cuda, "get_rng_state", _for_megatron(cuda.get_rng_state, get_state)),
        (cuda, "set_rng_state", _for_megatron(cuda.set_rng_state, set_state)),
        (mrandom, "_get_cuda_rng_state", get_state),
        (mrandom, "_set_cuda_rng_state", set_state),
    ]


def _cuda_tensors() -> list[Patch]:
    """`torch.tensor(..., device="cuda")` and `torch.zeros(..., device="cuda")`: the
    optimizer's loss scale and overflow flags, gradient clipping's norm and its dummy
    overflow buffer, the pipeline schedules' token count; made on the CPU.
    `Tensor.cuda()`: with tied embeddings and PP > 1 the last stage's copy of the
    embedding is moved to the GPU before its first all-reduce; it stays where it is.
    And `Tensor.type()` with no argument: gradient clipping asserts, and the optimizers
    sort parameters by, `torch.cuda.FloatTensor` / `HalfTensor` / `BFloat16Tensor`;
    a CPU tensor gives that name to megatron (and only to megatron)."""

    def on_cpu(factory: Callable) -> Callable:
        @functools.wraps(factory)
        def make(*args: Any, **kwargs: Any) -> torch.Tensor:
            if _is_cuda(kwargs.get("device")) and _from_megatron():
                kwargs["device"] = torch.device("cpu")
            return factory(*args, **kwargs)

        return make

    type_ = torch.Tensor.type

    @functools.wraps(type_)
    def tensor_type(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        name = type_(self, *args, **kwargs)
        if args or kwargs or self.device.type != "cpu" or not _from_megatron():
            return name
        return name.replace("torch.", "torch.cuda.", 1)

    return [
        (torch, "tensor", on_cpu(torch.tensor)),
        (torch, "zeros", on_cpu(torch.zeros)),
        (torch.Tensor, "cuda", _for_megatron(torch.Tensor.cuda, lambda self, *a, **k: self)),
        (torch.Tensor, "type", tensor_type),
    ]


def _moe_dispatcher() -> list[Patch]:
    """The all-to-all MoE token dispatcher copies its split sizes from the GPU on a side
    stream it creates with `torch.cuda.Stream()`, turning them into numpy on the way
    (`maybe_move_tensor_to_cpu(..., as_numpy=True)`); on the CPU there is no copy, so the
    sizes would stay tensors, which torch's `all_to_all_single` refuses. The side stream
    is a `_NoStream` and the sizes become numpy without a copy."""
    from megatron.core.transformer.moe import token_dispatcher

    def move(tensor: Any, as_numpy: bool = False, record_stream: bool = False) -> Any:
        return tensor.numpy() if as_numpy and torch.is_tensor(tensor) else tensor

    dispatcher = token_dispatcher.MoEAlltoAllTokenDispatcher
    return [
        (token_dispatcher, "maybe_move_tensor_to_cpu", move),
        (dispatcher, "cuda_dtoh_stream", dispatcher.cuda_dtoh_stream or _NoStream()),
    ]
