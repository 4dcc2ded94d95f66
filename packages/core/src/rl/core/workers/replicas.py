"""`RolloutReplicas`: the rollout replicas of a disaggregated placement as a membership that
changes, for runs that survive a lost replica (`trainer.rollout_restarts`).

A replica whose worker dies (killed, crashed, its node lost) or does not answer a health
check is dropped; the rows it was generating are generated again by the replicas left
(`RolloutRole`), with the same per-prompt seeds, so the step's samples are the ones an
unbroken run draws. A replacement is started in the lost replica's bundle of the placement
group (Ray moves the bundle to a node with room, or waits until one has), up to
`rollout_restarts` replacements in the run. It builds its engine meanwhile and joins at the
next weight push (`SplitGroup.push_weights`): the weight group is re-formed with the new
membership and every member receives the current weights and their version, so a sample
never mixes versions. Until then, and for good when there is no room for it, the replicas
left take the whole batch.

The object answers the worker-group calls `RolloutRole` and `SplitGroup` make (`call`,
`call_each`, `start`, `wait`, `submit`, `put`, `actors`, `world_size`), on the replicas in
service, in slot order.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from rl.core.errors import WorkerError
from rl.core.workers.waits import wait_surviving

log = logging.getLogger(__name__)

LOST = object()  # the answer of a replica that died during the call


class RolloutReplicas:
    """The replicas of `group` (a `RayWorkerGroup` of rollout workers), `restarts`
    replacements allowed; `build_args`: what a replacement's `build` is called with;
    `health_check_s`: how long an idle replica may take to answer a ping."""

    def __init__(
        self,
        group: Any,
        restarts: int,
        build_args: tuple[Any, ...],
        health_check_s: float = 60.0,
    ) -> None:
        self.group, self.restarts_left, self.build_args = group, restarts, build_args
        self.health_check_s = health_check_s
        self.slots: list[int] = list(range(group.world_size))  # in service, in order
        self.joining: dict[int, tuple[Any, Any]] = {}  # slot -> (actor, its build's ref)
        self.changed = False  # the membership changed since the weight group formed
        self.slot_of: dict[Any, int] = {}  # a started call -> the replica running it
        self.counts = {"restarts": 0, "lost": 0, "regenerated_rows": 0, "joined": 0}
        self.lock = threading.Lock()  # generation may run in a thread beside the pushes

    # --- the worker-group calls, on the replicas in service -------------------------------

    @property
    def actors(self) -> list[Any]:
        return [self.group.actors[slot] for slot in self.slots]

    @property
    def nodes(self) -> list[str]:
        return [self.group.nodes[slot] for slot in self.slots]

    @property
    def world_size(self) -> int:
        return len(self.slots)

    @property
    def timeout_s(self) -> float:
        return float(self.group.timeout_s)

    @property
    def broken(self) -> bool:
        return bool(self.group.broken)

    @broken.setter
    def broken(self, value: bool) -> None:
        self.group.broken = value

    def start(self, method: str, *args: Any) -> list[Any]:
        return self._launch(method, [args] * len(self.slots))

    def wait(self, refs: list[Any], role: str, method: str) -> list[Any]:
        """The answers of `start`ed calls from the replicas that gave one: a replica that
        died is dropped (and replaced) and has no answer."""
        return [answer for answer in self.wait_each(refs, role, method) if answer is not LOST]

    def call(self, role: str, method: str, *args: Any) -> list[Any]:
        return self.wait(self.start(method, *args), role, method)

    def call_each(self, role: str, method: str, per_rank: Sequence[tuple[Any, ...]]) -> list[Any]:
        return self.wait(self._launch(method, per_rank), role, method)

    def submit(self, rank: int, role: str, method: str, *args: Any) -> Any:
        actors = self.actors
        return actors[rank % len(actors)].run.remote(role, method, *args)

    def put(self, value: Any) -> Any:
        return self.group.put(value)

    # --- surviving a lost replica ---------------------------------------------------------

    def call_each_surviving(
        self, role: str, method: str, per_rank: Sequence[tuple[Any, ...]]
    ) -> list[Any | None]:
        """`call_each`, where a replica that dies answers None (and is dropped and replaced);
        the caller does its share again on the replicas left."""
        answers = self.wait_each(self._launch(method, per_rank), role, method)
        return [None if answer is LOST else answer for answer in answers]

    def _launch(self, method: str, per_slot: Sequence[tuple[Any, ...]]) -> list[Any]:
        """`method(*per_slot[k])` on the k-th replica in service, not waited for."""
        refs = []
        for slot, args in zip(list(self.slots), per_slot, strict=True):
            ref = getattr(self.group.actors[slot], method).remote(*args)
            self.slot_of[ref] = slot
            refs.append(ref)
        return refs

    def wait_each(self, refs: list[Any], role: str, method: str) -> list[Any]:
        """The answer of each `_launch`ed call in order, `LOST` for a replica that died
        (dropped, and replaced while restarts are left)."""
        slots = [self.slot_of.pop(ref) for ref in refs]
        answers, dead = wait_surviving(self, refs, role, method)
        for index in dead:
            self.drop(slots[index], f"{role}.{method}: it died")
        return [answers.get(index, LOST) for index in range(len(refs))]

    def drop(self, slot: int, why: str) -> None:
        """Take replica `slot` out of service (its worker killed, for good) and start its
        replacement while restarts are left; the last replica lost ends the run."""
        import ray

        with self.lock:
            if slot not in self.slots:
                return
            self.slots.remove(slot)
            self.changed = True
            self.counts["lost"] += 1
            log.warning("rollout replica %d lost (%s)", slot, why)
            ray.kill(self.group.actors[slot], no_restart=True)
            if self.restarts_left > 0:
                self._replace(slot)
            if not self.slots:
                raise WorkerError(
                    f"every rollout replica is lost (the last, replica {slot}: {why}); "
                    "the run resumes from its last checkpoint when restarted"
                )

    def _replace(self, slot: int) -> None:
        """A new worker in `slot`'s bundle, building its engine (not waited for)."""
        actor = self.group.new_actor(slot)
        self.joining[slot] = (actor, actor.build.remote(*self.build_args))
        self.restarts_left -= 1
        self.counts["restarts"] += 1
        log.warning(
            "rollout replica %d: a replacement is starting (%d restarts left)",
            slot,
            self.restarts_left,
        )

    def check_health(self) -> None:
        """Ping every replica in service; one that died or does not answer within
        `health_check_s` is dropped (and replaced)."""
        import ray

        slots = list(self.slots)
        refs = {self.group.actors[slot].ping.remote(): slot for slot in slots}
        ready, late = ray.wait(list(refs), num_returns=len(refs), timeout=self.health_check_s)
        for ref in late:
            self.drop(
                refs[ref],
                f"no answer to a health check within {self.health_check_s:g} s "
                "(trainer.rollout_health_check_timeout_s)",
            )
        for ref in ready:
            try:
                ray.get(ref)
            except ray.exceptions.RayError as error:
                self.drop(refs[ref], f"health check: {type(error).__name__}")

    def admit(self) -> list[int]:
        """The replacements whose engine is built, put in service (at a weight push, which
        gives them the current weights); one whose build failed or died is lost again."""
        import ray

        admitted = []
        with self.lock:
            for slot, (actor, built) in list(self.joining.items()):
                ready, _ = ray.wait([built], timeout=0)
                if not ready:
                    continue  # not placed or not built yet: asked again at the next push
                del self.joining[slot]
                try:
                    ray.get(built)
                    self.group.nodes[slot] = ray.get(
                        actor.node.remote(), timeout=self.health_check_s
                    )
                except ray.exceptions.RayError as error:
                    log.warning("rollout replica %d: its replacement failed (%s)", slot, error)
                    ray.kill(actor, no_restart=True)
                    if self.restarts_left > 0:
                        self._replace(slot)
                    continue
                self.group.actors[slot] = actor
                self.slots = sorted([*self.slots, slot])
                self.changed = True
                self.counts["joined"] += 1
                admitted.append(slot)
                log.warning("rollout replica %d is back in service", slot)
        return admitted

    def regenerated(self, rows: int) -> None:
        with self.lock:
            self.counts["regenerated_rows"] += rows

    def metrics(self) -> dict[str, float]:
        """The membership now and what happened to it so far in the run."""
        return {
            "rollout/replicas": float(len(self.slots)),
            "rollout/replica_nodes": float(len({self.group.nodes[slot] for slot in self.slots})),
            "rollout/replicas_joining": float(len(self.joining)),
            "rollout/replicas_lost": float(self.counts["lost"]),
            "rollout/replica_restarts": float(self.counts["restarts"]),
            "rollout/replicas_rejoined": float(self.counts["joined"]),
            "rollout/regenerated_rows": float(self.counts["regenerated_rows"]),
        }

    def shutdown(self) -> None:
        """The replicas in service stop as `RayWorkerGroup.shutdown` stops its workers; the
        lost ones and every replacement still starting or building are killed (none is
        left behind)."""
        import ray

        for actor, _ in self.joining.values():
            ray.kill(actor, no_restart=True)
        self.joining.clear()
        self.group.shutdown(live=self.slots)
