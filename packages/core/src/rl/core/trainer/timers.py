"""Per-phase wall-clock timers of one training step (`timing/<phase>` metrics)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class PhaseTimer:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start

    def metrics(self) -> dict[str, float]:
        out = {f"timing/{name}": value for name, value in self.seconds.items()}
        out["timing/step"] = sum(self.seconds.values())
        return out
