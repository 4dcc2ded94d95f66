"""`LocalWorkerGroup`: the embedded default, one `RoleWorker` in the driver's process.

It answers the same calls as `RayWorkerGroup` (`call`, `call_each`, `put`, `submit`)
with a world of one, so the controller, the role handles and the worker run the same
code on a laptop as on a cluster.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import Any

from rl.core.workers.worker import RoleWorker


class LocalWorkerGroup:
    world_size = 1

    def __init__(self, roles: Sequence[str]) -> None:
        self.roles = tuple(roles)
        self.worker = RoleWorker()

    def call(self, role: str, method: str, *args: Any) -> list[Any]:
        return [getattr(self.worker, method)(*args)]

    def call_each(self, role: str, method: str, per_rank: Sequence[tuple[Any, ...]]) -> list[Any]:
        (args,) = per_rank
        return [getattr(self.worker, method)(*args)]

    def put(self, value: Any) -> Any:
        return value

    def submit(self, rank: int, role: str, method: str, *args: Any) -> Awaitable[Any]:
        """`engines[role].method(*args)` in a thread, as an awaitable: calls submitted
        together run side by side (the engines' generate is thread-safe)."""
        return asyncio.to_thread(self.worker.run, role, method, *args)

    def engine(self, role: str) -> Any:
        """The engine itself (in-process only): for tests and tools that need the model."""
        return self.worker.engines[role]

    def shutdown(self) -> None:
        """The engines end; the driver's process group stays (the process goes on)."""
        self.worker.close_engines()
