"""`RayWorkerGroup`: one Ray actor per rank, in a placement group, running `RoleWorker`.

Ray is started locally when no address is given; `ray.init(address=...)` (the
`trainer.ray_address` key) joins an existing cluster, which is how a run spans nodes.
Every call waits on all ranks at once and fails fast with one `WorkerError` (see
`rl.core.workers.waits`: a death is named before the failures it caused).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import Any

from rl.core.errors import WorkerError
from rl.core.workers.waits import wait_together
from rl.core.workers.worker import RoleWorker

# What each actor's process needs before anything is imported: no auth token files, no
# tokenizer threads (OMP_NUM_THREADS, one per whole CPU of the share, is set per actor).
WORKER_ENV = {"RAY_AUTH_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false"}


def start_ray(address: str | None, num_cpus: float | None = None) -> None:
    """Join the cluster at `address`, or start a local one (no dashboard)."""
    import ray

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    if address:
        ray.init(address=address, runtime_env={"env_vars": WORKER_ENV})
    else:
        ray.init(
            num_cpus=None if num_cpus is None else max(1, round(num_cpus)),
            include_dashboard=False,
            runtime_env={"env_vars": WORKER_ENV},
        )


class RayWorkerGroup:
    """`world_size` `RoleWorker` actors hosting `roles`, one per device (or CPU share), or
    per `devices_per_worker` devices (a rollout replica spanning a tensor-parallel group).
    `distributed`: the ranks form one torch.distributed world (the train ranks do; rollout
    replicas of a disaggregated placement do not, each engine sets up its own)."""

    def __init__(
        self,
        roles: Sequence[str],
        world_size: int,
        *,
        device_type: str = "cpu",
        cpus_per_worker: float = 1.0,
        timeout_s: float = 600.0,
        address: str | None = None,
        devices_per_worker: int = 1,
        distributed: bool = True,
        worker_class: type = RoleWorker,
    ) -> None:
        import ray
        from ray.util.placement_group import placement_group, remove_placement_group

        self.roles, self.world_size, self.timeout_s = tuple(roles), world_size, timeout_s
        self.distributed, self.worker_class = distributed, worker_class
        self.broken = False  # a call failed: ranks may hang in a collective, do not wait on them
        gpus = devices_per_worker if device_type == "cuda" else 0
        cpus_per_worker *= 1 if gpus else devices_per_worker
        # a local Ray on CPU gets room for the workers' (possibly fractional) CPU shares;
        # on GPUs, and on a cluster, Ray counts what the machines have
        local_cpus = None if address or gpus else max(2.0, cpus_per_worker * world_size)
        start_ray(address, num_cpus=local_cpus)
        bundle = {"CPU": cpus_per_worker, **({"GPU": gpus} if gpus else {})}
        self.placement_group = placement_group([bundle] * world_size, strategy="PACK")
        ready, _ = ray.wait([self.placement_group.ready()], timeout=timeout_s)
        if not ready:
            remove_placement_group(self.placement_group)
            free = {k: v for k, v in ray.available_resources().items() if k in ("CPU", "GPU")}
            raise WorkerError(
                f"cannot place {world_size} workers of {bundle} within {timeout_s:g} s: the Ray "
                f"cluster has {free or 'nothing'} free (cluster.n_gpus_per_node, "
                "cluster.cpus_per_worker)"
            )
        self.actors: list[Any] = []
        self.nodes: list[str] = []
        try:
            self._start_workers(cpus_per_worker, gpus)
        except BaseException:
            self.broken = True
            self.shutdown()
            raise

    def _start_workers(self, cpus_per_worker: float, gpus: int) -> None:
        self.cpus_per_worker, self.gpus = cpus_per_worker, gpus
        self.actors = [self.new_actor(rank) for rank in range(self.world_size)]
        # each worker's node, which a death names (`waits.node_of`)
        self.nodes = self._wait([a.node.remote() for a in self.actors], "workers", "start")
        if not self.distributed:
            return
        address_, port = self._wait([self.actors[0].rendezvous.remote()], "workers", "start")[0]
        self.call("workers", "connect", address_, port)

    def new_actor(self, rank: int) -> Any:
        """A worker for rank `rank` in its bundle of the placement group (started, not
        waited for): at start, and in place of a lost rollout replica (`replicas`)."""
        import ray
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        threads = str(max(1, int(self.cpus_per_worker)))
        remote: Any = ray.remote(self.worker_class)
        return remote.options(
            num_cpus=self.cpus_per_worker,
            num_gpus=self.gpus,
            max_restarts=0,
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                self.placement_group, placement_group_bundle_index=rank
            ),
            runtime_env={"env_vars": {**WORKER_ENV, "OMP_NUM_THREADS": threads}},
        ).remote(rank, self.world_size)

    # --- calls on every rank --------------------------------------------------------

    def call(self, role: str, method: str, *args: Any) -> list[Any]:
        """`method(*args)` of every rank's worker; answers in rank order."""
        return self._wait(self.start(method, *args), role, method)

    def start(self, method: str, *args: Any) -> list[Any]:
        """`method(*args)` on every rank, not waited for: `wait` them (with another group's
        calls running meanwhile)."""
        return [getattr(a, method).remote(*args) for a in self.actors]

    def wait(self, refs: list[Any], role: str, method: str) -> list[Any]:
        """The answers of `start`ed calls, as `call` waits for them."""
        return self._wait(refs, role, method)

    def call_each(self, role: str, method: str, per_rank: Sequence[tuple[Any, ...]]) -> list[Any]:
        """`method(*per_rank[r])` on rank r; answers in rank order."""
        refs = [
            getattr(a, method).remote(*args) for a, args in zip(self.actors, per_rank, strict=True)
        ]
        return self._wait(refs, role, method)

    def submit(self, rank: int, role: str, method: str, *args: Any) -> Any:
        """`engines[role].method(*args)` on rank `rank`, as an awaitable (a Ray ObjectRef);
        a failure surfaces when it is awaited."""
        return self.actors[rank].run.remote(role, method, *args)

    def put(self, value: Any) -> Any:
        """One copy in Ray's object store, passed by reference to every rank."""
        import ray

        return ray.put(value)

    def _wait(self, refs: list[Any], role: str, method: str) -> list[Any]:
        """All answers, or a WorkerError at the first failure or after `timeout_s`."""
        return wait_together([(self, refs, role, method)])[0]

    def shutdown(self, live: Sequence[int] | None = None) -> None:
        """Stop the workers (best effort: a dead one is already gone; `live`: the ranks
        still in service, the only ones asked to close their engines) and free the
        devices."""
        import ray
        from ray.util.placement_group import remove_placement_group

        if not self.broken:
            self.timeout_s = min(self.timeout_s, 60.0)
            ranks = range(self.world_size) if live is None else live
            with contextlib.suppress(WorkerError):
                self._wait([self.actors[r].shutdown.remote() for r in ranks], "workers", "shutdown")
        for actor in self.actors:
            ray.kill(actor)
        remove_placement_group(self.placement_group)
