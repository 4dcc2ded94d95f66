"""Load a checkpoint file without ever running code from it.

`torch.load(weights_only=True)` only rebuilds tensors and plain Python values;
a file that needs anything else (a pickled object, a crafted `__reduce__`) is
refused, and that refusal is a `CheckpointError` naming the file, not a bug.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import torch

from rl.core.errors import CheckpointError


def load_state(path: str | Path) -> Any:
    """The tensors and plain values stored in `path` by `torch.save`."""
    try:
        return torch.load(path, weights_only=True, map_location="cpu")
    except FileNotFoundError:
        raise CheckpointError(f"{path} is missing") from None
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise CheckpointError(
            f"{path} cannot be loaded safely (only tensors and plain values are allowed): {reason}"
        ) from None
