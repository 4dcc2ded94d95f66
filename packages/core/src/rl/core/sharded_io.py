"""Sharded checkpoints with torch.distributed.checkpoint (DCP), loaded without running code.

Each rank writes its own shards (`__<rank>_0.distcp`, tensors only) and the coordinator
writes `.metadata`; loading reshards to whatever world size loads them (or, with no
process group, into full tensors: `rl merge`). DCP's own reader unpickles `.metadata`
with the plain unpickler and non-tensor items with `weights_only=False`, either of which
runs code from a crafted file; here `.metadata` is read by an unpickler that builds only
DCP's metadata classes, and only tensors are stored, so a checkpoint holding anything
else is refused (`CheckpointError`), never executed.
"""

from __future__ import annotations

import errno
import pickle
import re
from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner

from rl.core.errors import CheckpointError, RunStopped

# Modules whose classes (and only classes: building one runs no code of the file's choice)
# the metadata may name.
_CLASS_MODULES = (
    "torch.distributed.checkpoint.metadata",
    "torch.distributed.checkpoint.filesystem",
    "torch.distributed.checkpoint.planner",
    "pathlib",
    "collections",
)
_TORCH_NAMES = {"Size", "device"}
_BUILTINS = {"set", "frozenset", "tuple", "list", "dict", "bytes", "bytearray", "slice"}


class _MetadataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in _BUILTINS:
            return super().find_class(module, name)
        if module == "torch" and (
            name in _TORCH_NAMES or isinstance(getattr(torch, name, None), torch.dtype)
        ):
            return getattr(torch, name)
        if module in ("torch._utils", "torch.serialization") and name == "_get_layout":
            return super().find_class(module, name)
        if module in _CLASS_MODULES:
            found = super().find_class(module, name)
            if isinstance(found, type):
                return found
        raise CheckpointError(
            f"checkpoint metadata refers to {module}.{name}, which a DCP checkpoint written by "
            "rl never holds: refusing to load it"
        )


class SafeReader(FileSystemReader):
    """DCP's file reader with `.metadata` read by `_MetadataUnpickler`."""

    def read_metadata(self, *args: Any, **kwargs: Any) -> Any:
        from torch.distributed.checkpoint.metadata import StorageMeta

        path = self._get_metadata_path(kwargs.get("rank"))
        try:
            with self.fs.create_stream(path, "rb") as stream:
                metadata = _MetadataUnpickler(stream).load()
        except FileNotFoundError:
            raise CheckpointError(f"{path} is missing") from None
        except (pickle.UnpicklingError, EOFError, AttributeError, ValueError) as error:
            raise CheckpointError(f"{path} is not readable checkpoint metadata ({error})") from None
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata


class TensorsOnlyPlanner(DefaultLoadPlanner):
    """Loads tensors; an item stored as pickled bytes is refused instead of unpickled."""

    def load_bytes(self, read_item: Any, value: Any) -> None:
        raise CheckpointError(
            f"checkpoint item {read_item.dest_index.fqn!r} is pickled bytes, which rl never "
            "writes: refusing to unpickle it"
        )


ZIP_WRITE_FAILURE = re.compile(r"unexpected pos|PytorchStreamWriter|inline_container")


def save_sharded(state: dict[str, Any], folder: str | Path) -> None:
    """Every rank writes its shards of `state` (nested dicts of tensors / DTensors) into
    `folder`; a collective when a process group is up. Write errors are OSError."""
    _check_tensors(state, "")
    try:
        dcp.save(state, storage_writer=FileSystemWriter(str(folder)))
    except RuntimeError as error:
        # the coordinator's last step (the metadata file) can raise torch's zip-writer
        # error unwrapped, e.g. at a file-size limit
        if not ZIP_WRITE_FAILURE.search(str(error)):
            raise
        raise OSError(errno.EIO, f"{folder}: {str(error).strip().splitlines()[-1]}") from error
    except CheckpointException as error:
        # A rank's write failed. The state was checked to be tensors only, so what is left
        # is I/O: a full disk or a file-size limit surfaces as OSError from Python's writer
        # or as a RuntimeError from torch's zip writer ("unexpected pos"); both are OSError
        # here, which the checkpoint writer reports keeping the previous checkpoint. A stop
        # (the grace period of a signal ran out mid-write) is the stop, not a write error.
        for failure, _ in error.failures.values():
            if isinstance(failure, RunStopped):
                raise failure from None
        for failure, _ in error.failures.values():
            if isinstance(failure, OSError):
                raise OSError(failure.errno, f"{folder}: {failure.strerror or failure}") from error
        first = next(iter(error.failures.values()))[0]
        detail = str(first).strip().splitlines()[-1] if str(first).strip() else type(first).__name__
        raise OSError(errno.EIO, f"{folder}: {detail}") from error


def load_sharded(state: dict[str, Any], folder: str | Path, *, no_dist: bool = False) -> None:
    """Fill `state` in place from `folder`, resharding to its tensors' placements
    (`no_dist`: without a process group, e.g. into full tensors)."""
    path = Path(folder)
    if not path.is_dir():
        raise CheckpointError(f"{path} is missing")
    try:
        dcp.load(
            state,
            storage_reader=SafeReader(str(path)),
            planner=TensorsOnlyPlanner(),
            no_dist=no_dist,
        )
    except CheckpointError:
        raise
    except (Exception, CheckpointException) as error:  # DCP wraps each rank's error in text
        text = str(error)
        refused = re.search(r"checkpoint (?:metadata|item)[^;\n]*refusing[^;\n]*", text)
        reason = refused.group(0) if refused else text.strip().splitlines()[-1]
        raise CheckpointError(f"{path} cannot be loaded: {reason.strip()}") from None


def _check_tensors(state: Any, key: str) -> None:
    if isinstance(state, dict):
        for name, value in state.items():
            _check_tensors(value, f"{key}.{name}" if key else str(name))
    elif not isinstance(state, torch.Tensor):
        raise TypeError(f"sharded state {key!r} is a {type(state).__name__}, not a tensor")
