"""Peak resident memory: of this process (`peak_rss_mib`), and of its whole process tree
sampled in the background, attributed to the trainer's phases (`TreeSampler`)."""

from __future__ import annotations

import contextlib
import os
import resource
import sys
import threading
from collections.abc import Callable


def peak_rss_mib() -> float:
    """ru_maxrss: KiB on Linux, bytes on macOS."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1 << 20) if sys.platform == "darwin" else peak / 1024


def tree_rss_bytes(pid: int) -> int:
    """The resident set of `pid` plus every live descendant (vLLM's engine core, workers)."""
    import psutil

    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):  # ended since the listing
            total += process.memory_info().rss
    return total


class TreeSampler:
    """Samples the process tree's total RSS every `interval_s` in a daemon thread.

    `peak_mib` is the largest sum seen; `phase_peak_mib[name]` the largest seen while
    `phase()` returned `name` (None, between phases, is not recorded). Use as a context
    manager; one last sample is taken on exit. `enabled=False`: a context that samples
    nothing (peaks stay 0).
    """

    def __init__(
        self,
        phase: Callable[[], str | None] = lambda: None,
        interval_s: float = 0.05,
        pid: int | None = None,
        enabled: bool = True,
    ) -> None:
        self.enabled = enabled
        self.phase = phase
        self.interval_s = interval_s
        self.pid = os.getpid() if pid is None else pid
        self.peak_mib = 0.0
        self.phase_peak_mib: dict[str, float] = {}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def sample(self) -> None:
        name = self.phase()  # before the reading: a phase that ends meanwhile still owns it
        mib = tree_rss_bytes(self.pid) / (1 << 20)
        self.samples += 1
        self.peak_mib = max(self.peak_mib, mib)
        if name is not None:
            self.phase_peak_mib[name] = max(self.phase_peak_mib.get(name, 0.0), mib)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def __enter__(self) -> TreeSampler:
        if self.enabled:
            self.sample()
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.enabled:
            return
        self._stop.set()
        self._thread.join()
        self.sample()
