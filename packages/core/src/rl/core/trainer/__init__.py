"""The controller: one driver loop over the engines (see loop.py and step.py).

`run_training` / `run_sft` are imported lazily so that light submodules
(checkpoint, rng, timers) load without the whole training stack.
"""

from __future__ import annotations

from typing import Any

__all__ = ["run_sft", "run_training"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from rl.core.trainer import loop

        return getattr(loop, name)
    raise AttributeError(f"module 'rl.core.trainer' has no attribute {name!r}")
