"""Fixes for megatron-core bugs that the local (non-TransformerEngine) spec runs into.

Each is a no-op once megatron-core has fixed it; none changes behaviour on CUDA.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


def fix_router_without_te() -> None:
    """megatron-core 0.16 reads `moe_utils.te_general_gemm` in the MoE router's gating
    linear whenever the router dtype is not fp64, but defines it only when
    TransformerEngine imports: without TE every MoE forward is a NameError. None is what
    the code means (fall back to torch's matmul)."""
    from megatron.core.transformer.moe import moe_utils

    if not hasattr(moe_utils, "te_general_gemm"):
        moe_utils.te_general_gemm = None


@contextmanager
def fresh_adam_state(optimizer: object) -> Iterator[None]:
    """Within: a fresh megatron optimizer has the Adam state a checkpoint overwrites.

    Without TransformerEngine or Apex, megatron-core 0.16's distributed optimizer reads
    the torch Adam `step` of every parameter when building the state dict to load into,
    and asserts there is exactly one value; a fresh optimizer has none (its
    `init_state_fn` creates the moments but no step). Zero moments and step 0 are what a
    fresh Adam has anyway. The steps added are removed on the way out (the checkpoint's
    per-parameter state has none; the loaded global step is set by the load itself).
    """
    _add_steps(optimizer)
    try:
        yield
    finally:
        for state in _states(optimizer):
            state.pop("step", None)


def _states(optimizer: object) -> Iterator[dict]:
    import torch

    for chained in getattr(optimizer, "chained_optimizers", [optimizer]):
        inner = getattr(chained, "optimizer", None)
        if isinstance(inner, torch.optim.Optimizer):
            for group in inner.param_groups:
                for param in group["params"]:
                    yield inner.state[param]


def _add_steps(optimizer: object) -> None:
    import torch

    for chained in getattr(optimizer, "chained_optimizers", [optimizer]):
        inner = getattr(chained, "optimizer", None)
        if not isinstance(inner, torch.optim.Optimizer):
            continue
        for group in inner.param_groups:
            for param in group["params"]:
                state = inner.state[param]
                if "step" not in state:
                    state["step"] = torch.zeros((), dtype=torch.float32)
                    state.setdefault("exp_avg", torch.zeros_like(param))
                    state.setdefault("exp_avg_sq", torch.zeros_like(param))


@contextmanager
def per_parameter_state_loads(optimizer: object) -> Iterator[None]:
    """Within: megatron-core loads a per-parameter (`fully_reshardable`) distributed
    optimizer state without TransformerEngine or Apex.

    megatron-core 0.16 gives each torch Adam state a `step` before it copies the loaded
    tensors in, then copies every key the live state has from the loaded per-parameter
    tensors, which never hold a step (it is handled apart): a KeyError on the first
    parameter. Within this block the live step is handed back with the loaded tensors
    (copied onto itself); the step saved beside the checkpoint is set afterwards
    (`set_adam_steps`)."""
    patched = []
    for chained in getattr(optimizer, "chained_optimizers", [optimizer]):
        if not hasattr(chained, "_set_main_param_and_optimizer_states"):
            continue  # not a distributed optimizer: its state is per parameter already
        set_states = chained._set_main_param_and_optimizer_states
        get_states = chained._get_main_param_and_optimizer_states

        def with_live_step(model_param, tensors, set_states=set_states, get_states=get_states):
            live = get_states(model_param)
            if "step" in live and "step" not in tensors:
                tensors = {**tensors, "step": live["step"]}
            set_states(model_param, tensors)

        chained._set_main_param_and_optimizer_states = with_live_step
        patched.append(chained)
    try:
        yield
    finally:
        for chained in patched:
            del chained._set_main_param_and_optimizer_states  # the class's method again


def adam_step(optimizer: object) -> float | None:
    """The torch Adam step count (every parameter steps together under megatron: its
    gradient buffers hold zeros for parameters without a gradient); None under TE/Apex's
    fused Adam, which keeps it per parameter group."""
    for state in _states(optimizer):
        if "step" in state:
            return float(state["step"])
    return None


def set_adam_steps(optimizer: object, step: float | None) -> None:
    """After a load without TransformerEngine/Apex, megatron-core 0.16 restores torch
    Adam's `step` from a value it did not save correctly (0 after one step, measured), and
    gives every parameter the *same* tensor, which torch's Adam increments in place once
    per parameter: the bias correction would be wrong from the first step after resuming.
    Each parameter gets its own copy of the step saved beside the checkpoint."""
    import torch

    if step is None:
        return
    for state in _states(optimizer):
        if "step" in state:
            state["step"] = torch.tensor(step, dtype=torch.float32)


@contextmanager
def checkpoint_writes_without_cuda() -> Iterator[None]:
    """Within: megatron-core's checkpoint writer works on a machine without CUDA.

    Its filesystem writer copies tensors to the CPU with `non_blocking=True` and then calls
    `torch.cuda.synchronize()` unconditionally, and its finalisation puts a one-element
    failure flag on `torch.cuda.current_device()`; both raise where torch has no CUDA.
    Inside this block, and only when CUDA is unavailable, there is nothing to wait for and
    the flag lives on the CPU (the process group is gloo there). Used by `rl convert-ckpt`,
    which converts on CPU machines; training on a GPU never enters it.
    """
    import torch

    if torch.cuda.is_available():
        yield
        return
    synchronize, current_device = torch.cuda.synchronize, torch.cuda.current_device
    torch.cuda.synchronize = lambda *args, **kwargs: None
    torch.cuda.current_device = lambda: torch.device("cpu")  # type: ignore[assignment]
    try:
        yield
    finally:
        torch.cuda.synchronize, torch.cuda.current_device = synchronize, current_device
