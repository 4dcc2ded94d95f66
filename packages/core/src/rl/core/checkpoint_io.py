"""Reading and writing checkpoint files: no code runs on load, write failures are `OSError`.

Loading: `torch.load(weights_only=True)` only rebuilds tensors and plain Python
values, and weights are safetensors; a file that needs anything else (a pickled
object, a crafted `__reduce__`) is refused with a `CheckpointError` naming it.

Writing: torch and safetensors report a full disk or an I/O error as their own
exception types; they are re-raised as `OSError`, so that the checkpoint writer can
tell a failed write (keep the previous checkpoint, stop with a clear message) from a
bug (keep the traceback).
"""

from __future__ import annotations

import errno
import json
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file

from rl.core.atomic_files import os_error_of
from rl.core.errors import CheckpointError
from rl.core.file_modes import save_safetensors

TIED_KEY = "rl.tied"  # safetensors metadata: {tied name: the name its tensor is under}


def save_state(state: Any, path: str | Path) -> None:
    """Tensors and plain values (no objects: `load_state` would refuse them) to `path`."""
    _writing(path, lambda: torch.save(state, path))


def save_weights(weights: dict[str, torch.Tensor], path: str | Path) -> None:
    """Named tensors to a safetensors file, contiguous.

    A tensor under several names (tied: the same memory, shape and strides, as a tied
    model's `state_dict()` holds `lm_head.weight`) is written once, under its first name,
    as `save_pretrained` writes a tied model; the other names go in the file's metadata
    and `load_weights` gives them back as that same tensor. Other tensors that share
    storage (views of one buffer) are written as copies."""
    unique, tied = _unshared(weights)
    metadata = {TIED_KEY: json.dumps(tied)} if tied else None
    _writing(path, lambda: save_safetensors(unique, path, metadata))


def load_state(path: str | Path) -> Any:
    """The tensors and plain values stored in `path` by `save_state`."""
    try:
        return torch.load(path, weights_only=True, map_location="cpu")
    except FileNotFoundError:
        raise CheckpointError(f"{path} is missing") from None
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError) as error:
        raise CheckpointError(
            f"{path} cannot be loaded safely (only tensors and plain values are allowed): "
            f"{_first_line(error)}"
        ) from None


def load_weights(path: str | Path) -> dict[str, torch.Tensor]:
    """The tensors `save_weights` wrote, tied names again one tensor."""
    try:
        weights = load_file(str(path))
        with safe_open(str(path), framework="pt") as reader:
            metadata = reader.metadata() or {}
    except FileNotFoundError:
        raise CheckpointError(f"{path} is missing") from None
    except (SafetensorError, OSError) as error:
        raise CheckpointError(f"{path} is not a readable safetensors file: {error}") from None
    try:
        tied = json.loads(metadata.get(TIED_KEY, "{}"))
        for alias, name in tied.items():
            weights[alias] = weights[name]
    except (ValueError, KeyError, AttributeError, TypeError) as error:
        raise CheckpointError(f"{path} has unreadable tied-weight metadata: {error}") from None
    return weights


def _writing(path: str | Path, write: Callable[[], None]) -> None:
    try:
        write()
    except OSError:
        raise
    except (RuntimeError, SafetensorError) as error:
        text = str(error)
        underlying = os_error_of(error)  # safetensors names the OS error's number
        if underlying is not None:
            raise OSError(underlying.errno, f"{_first_line(error)} ({path})") from error
        if "write" in text.lower() or "I/O error" in text:  # torch's wording
            raise OSError(errno.EIO, f"{_first_line(error)} ({path})") from error
        raise


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _unshared(
    weights: dict[str, torch.Tensor],
) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """(the tensors to write, each storage once; {tied name: the name written})."""
    storages: set[int] = set()
    first: dict[tuple[object, ...], str] = {}
    out: dict[str, torch.Tensor] = {}
    tied: dict[str, str] = {}
    for name, tensor in weights.items():
        key = (tensor.device, tensor.dtype, tensor.data_ptr(), tensor.shape, tensor.stride())
        if tensor.numel() and key in first:
            tied[name] = first[key]
            continue
        first[key] = name
        pointer = tensor.untyped_storage().data_ptr()
        out[name] = tensor.contiguous() if pointer not in storages else tensor.clone()
        storages.add(pointer)
    return out, tied
