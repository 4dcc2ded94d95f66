"""Colocated roles take turns on one device: before a role works, the others step aside.

A worker hosts every role placed on its device. When a call reaches a role that is not
the one working, the train engines that ask to (their `offloads`: the backend's offload
keys) move their memory off the device, and the role about to work comes back. The rollout
engine's own memory (KV cache) is released and restored by the controller's
`sleep()` / `wake()`. Device memory before and after each switch is kept as metrics.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from typing import Any

import torch


def memory_gib(device_type: str) -> float:
    """Memory this process holds: allocated device memory on CUDA, resident set on CPU."""
    if device_type == "cuda":
        return torch.cuda.memory_allocated() / 2**30
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**30
    except (OSError, ValueError):  # not Linux: the peak is what the platform tells
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


class Turns:
    """Who works on this device now; `enter(role)` switches, offloading the others."""

    def __init__(
        self, engines: Mapping[str, Any], offloading: Collection[str], device_type: str
    ) -> None:
        self.engines = engines
        self.offloading = [role for role in engines if role in offloading]
        self.device_type = device_type
        self.current: str | None = None
        self.away: set[str] = set()  # offloaded roles
        self.metrics: dict[str, float] = {}

    def enter(self, role: str) -> None:
        if role == self.current:
            return
        before = memory_gib(self.device_type) if self.offloading else 0.0
        for other in self.offloading:
            if other != role and other not in self.away:
                self.engines[other].offload()
                self.away.add(other)
        if role in self.away:
            self.engines[role].onload()
            self.away.discard(role)
        self.current = role
        if self.offloading:
            self.metrics[f"memory/{role}_before_gib"] = before
            self.metrics[f"memory/{role}_after_gib"] = memory_gib(self.device_type)

    def drain_metrics(self) -> dict[str, float]:
        metrics, self.metrics = self.metrics, {}
        return metrics
