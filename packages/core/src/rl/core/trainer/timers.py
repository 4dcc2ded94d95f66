"""Per-phase wall-clock timers of one training step (`timing/<phase>` metrics).

`current_phase()` names the innermost phase open now, in any timer of this process: a
sampler thread (`rl.bench`'s memory sampler) reads it to attribute what it measures to a
phase without the trainer knowing about it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

_open: list[str] = []  # the phases open now, innermost last


def current_phase() -> str | None:
    """The innermost phase open now (None between phases)."""
    return _open[-1] if _open else None


class PhaseTimer:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        _open.append(name)
        try:
            yield
        finally:
            _open.remove(name)
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start

    def metrics(self) -> dict[str, float]:
        out = {f"timing/{name}": value for name, value in self.seconds.items()}
        out["timing/step"] = sum(self.seconds.values())
        return out
