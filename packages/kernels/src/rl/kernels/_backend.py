"""Which implementation runs an op: loading the compiled modules and choosing by device.

Every op has a torch reference and may have `cpp` (CPU), `cuda` and `triton`
implementations. The fastest available one for the tensor's device is chosen,
unless `RL_KERNELS_IMPL=reference|cpp|triton|cuda` forces one.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
from types import ModuleType

IMPLS = ("reference", "cpp", "triton", "cuda")
ENV_VAR = "RL_KERNELS_IMPL"

# Preference order per device type: the first available one wins.
_PREFERENCE = {"cpu": ("cpp", "reference"), "cuda": ("cuda", "triton", "reference")}


@functools.cache
def compiled_module(name: str) -> ModuleType | None:
    """`rl.kernels._C` or `rl.kernels._C_cuda`, or None when it was not built."""
    try:
        return importlib.import_module(f"rl.kernels.{name}")
    except ImportError:
        return None


@functools.cache
def compiled_import_error(name: str) -> str | None:
    """Why `rl.kernels.<name>` does not import (None when it does)."""
    try:
        importlib.import_module(f"rl.kernels.{name}")
    except ImportError as error:
        return str(error)
    return None


def triton_interpreted() -> bool:
    """Triton runs kernels on CPU tensors through its interpreter (`TRITON_INTERPRET=1`)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


@functools.cache
def triton_usable() -> bool:
    """Triton can launch kernels: a GPU driver, or the CPU interpreter."""
    if importlib.util.find_spec("triton") is None:
        return False
    if os.environ.get("TRITON_INTERPRET") == "1":
        return True
    import torch

    return torch.cuda.is_available()


def compiled_impls(device_type: str) -> set[str]:
    """The torch reference plus the compiled implementations built for `device_type`
    (`cpp` on CPU, `cuda` on GPU): what an op with C++/CUDA kernels can run."""
    impls = {"reference"}
    if device_type == "cpu" and compiled_module("_C") is not None:
        impls.add("cpp")
    if device_type == "cuda" and compiled_module("_C_cuda") is not None:
        impls.add("cuda")
    return impls


def forced_impl() -> str | None:
    value = os.environ.get(ENV_VAR, "").strip().lower()
    if not value:
        return None
    if value not in IMPLS:
        raise ValueError(f"{ENV_VAR}={value!r} is not an implementation; choose one of {IMPLS}")
    return value


def choose_impl(
    op: str,
    device_type: str,
    available: set[str],
    preference: dict[str, tuple[str, ...]] | None = None,
) -> str:
    """The implementation of `op` to run on `device_type`, given those `op` has.

    `preference` overrides the default order per device type for this op (an op
    whose GPU implementations rank differently from the default). Raises a clear
    error when `RL_KERNELS_IMPL` forces one that is missing.
    """
    forced = forced_impl()
    if forced is not None:
        if forced not in available:
            raise RuntimeError(
                f"{ENV_VAR}={forced} but {op} has no usable {forced} implementation on "
                f"{device_type} (usable: {sorted(available)}); unset {ENV_VAR} or rebuild "
                "rl-kernels with that backend"
            )
        return forced
    order = {**_PREFERENCE, **(preference or {})}
    for impl in order.get(device_type, ("reference",)):
        if impl in available:
            return impl
    return "reference"
