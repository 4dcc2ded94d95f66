"""Start a run's roles with the configured launcher and hand back their contract handles.

`trainer.launcher: local` (the default) runs every role in this process; `ray` runs one
`RoleWorker` per device of the `cluster` placement. Either way the controller gets
`TrainRole` / `RolloutRole` handles and a weight sync, and never learns which ran.

With Ray, the roles either take turns on the same devices (the hybrid engine: verl's
`hybrid_engine`, ChatLearn's `colocation` of every role, RLinf's
`"actor,rollout,ref": all`), each rank's rollout replica filled from its own actor rank;
or the rollout runs on devices of its own (`layout.RayLayout.disaggregated`: verl's
one-step-off `hybrid_engine=False`, ROLL's split `device_mapping`, RLinf's disaggregated
`component_placement`), its replicas filled from the actor's rank 0 over a weight group
(`split_group`). The reference and critic run on the actor's devices.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rl.core.config import Config, ConfigError
from rl.core.config.cluster import placement_from_cluster
from rl.core.config.overrides import render_overrides
from rl.core.micro_batches import Rows
from rl.core.placement import Placement, PlacementError, parse_verl_hybrid
from rl.core.workers.layout import RayLayout, layout_of
from rl.core.workers.local_group import LocalWorkerGroup
from rl.core.workers.roles import RolloutRole, TrainRole
from rl.core.workers.waits import wait_together


@dataclass
class LaunchedRoles:
    actor: TrainRole
    rollout: RolloutRole
    ref: TrainRole | None
    critic: TrainRole | None
    sync_weights: Callable[[int], dict[str, float]]
    group: Any
    teacher: TrainRole | None = None  # on-policy distillation's (`distillation.enabled`)

    def shutdown(self) -> None:
        self.group.shutdown()

    def rng_states(self) -> list[dict[str, Any]]:
        """Each rank's RNG state, for checkpoints (resumes are bit-identical with them)."""
        return self.group.call("workers", "rng_state")

    def set_rng_states(self, states: list[dict[str, Any]]) -> bool:
        """Restore what `rng_states` returned; False (nothing changed) when the checkpoint
        was written by another number of ranks."""
        if len(states) != self.group.world_size:
            return False
        self.group.call_each("workers", "set_rng_state", [(state,) for state in states])
        return True


def needed_roles(config: Config) -> tuple[str, ...]:
    roles = ["actor", "rollout"]
    if config.uses_reference:
        roles.append("ref")
    if config.uses_critic:
        roles.append("critic")
    if config.distillation.enabled:
        roles.append("teacher")  # on the actor's devices, as the reference
    return tuple(roles)


def cluster_placement(config: Config) -> Placement:
    """The `cluster` section's placement; with no dialect set, verl's hybrid engine (every
    role on every device of nnodes × n_gpus_per_node)."""
    cluster, tp = config.cluster, config.rollout.tensor_parallel_size
    try:
        if not cluster.dialects():
            return parse_verl_hybrid(
                True,
                nnodes=cluster.nnodes,
                n_gpus_per_node=cluster.n_gpus_per_node,
                tensor_parallel_size=tp,
            )
        return placement_from_cluster(cluster, tensor_parallel_size=tp)
    except PlacementError as error:
        raise ConfigError(f"cluster: {error}") from error


def ray_world(config: Config) -> tuple[int, float]:
    """(devices, CPUs per device) of the Ray launcher, checked against what it supports and
    what the batch sizes allow (rows split over the train ranks)."""
    world, cpus = ray_ranks(config)
    layout = ray_layout(config)
    check_divisible(config, layout.train_ranks if layout is not None else world)
    return world, cpus


def ray_ranks(config: Config) -> tuple[int, float]:
    """(devices, CPUs per device) of the Ray launcher: the train ranks and, when the rollout
    runs on devices of its own, its replicas' devices (`layout.ray_layout`); in CPU mode
    (`cluster.num_cpus`) one rank with the roles' CPU shares."""
    placement = cluster_placement(config)
    roles = needed_roles(config)
    if placement.n_gpus_per_node == 0:  # CPU mode: one process hosting every role
        shares = placement.num_cpus
        return 1, sum(shares.get(role, 0.0) for role in roles) or config.cluster.cpus_per_worker
    layout = layout_of(config, placement, roles)
    return layout.devices, layout.cpus_per_device


def ray_layout(config: Config) -> RayLayout | None:
    """The Ray workers of the config's placement (None in CPU mode: one worker)."""
    placement = cluster_placement(config)
    if placement.n_gpus_per_node == 0:
        return None
    return layout_of(config, placement, needed_roles(config))


def replica_size(config: Config, role: str) -> int:
    """Consecutive ranks that hold one copy of `role`'s model between them and take the
    same rows (Ulysses' group, megatron's TP × CP × PP): the train engine's answer when
    its class declares `Replicated`, else 1."""
    from rl.core.engine_contract import declares
    from rl.core.engines import Replicated
    from rl.core.workers.build import role_spec, train_engine_class

    engine_class = train_engine_class(config, role)
    if not declares(engine_class, Replicated):
        return 1
    return int(engine_class.replica_size(role_spec(config, role)))


def fit_world(config: Config, role: str, world: int) -> dict[str, Any]:
    """The overrides that shrink `role`'s parallel sizes to fit `world` ranks (the train
    engine's answer when its class declares `Replicated`, else none)."""
    from rl.core.engine_contract import declares
    from rl.core.engines import Replicated
    from rl.core.workers.build import role_spec, train_engine_class

    engine_class = train_engine_class(config, role)
    if not declares(engine_class, Replicated):
        return {}
    return dict(engine_class.fit_world(role_spec(config, role), world))


def check_divisible(config: Config, world: int) -> None:
    """Rows split evenly over data-parallel ranks (every rank runs as many passes): the
    world divided by each role's ranks per model copy (ROLL's global batch arithmetic)."""
    sections: list[tuple[str, Any]] = [("actor", config.actor)]
    if config.uses_critic:
        sections.append(("critic", config.critic))
    for section, role in sections:
        sp = replica_size(config, section)
        if world % sp:
            fix = render_overrides(fit_world(config, section, world))
            raise ConfigError(
                f"{section}: {sp} ranks per model copy (ulysses_sequence_parallel_size, or "
                f"megatron's TP × PP × CP) do not divide the {world} ranks"
                + (f": pass {fix}" if fix else "")
            )
        Rows.of(config, role).check_split(world // sp, section)


def launch_roles(config: Config, total_steps: int) -> LaunchedRoles:
    """Start the workers of `trainer.launcher` and build every role's engines on them."""
    roles = needed_roles(config)
    group: Any
    if config.trainer.launcher == "ray":
        layout = ray_layout(config)
        if layout is not None and layout.disaggregated:
            return _launch_split(config, roles, layout, total_steps)
        from rl.core.workers.ray_group import RayWorkerGroup

        world, cpus = ray_world(config)
        group = RayWorkerGroup(
            roles,
            world,
            device_type=config.trainer.device,
            cpus_per_worker=cpus,
            timeout_s=config.trainer.worker_timeout_s,
            address=config.trainer.ray_address,
        )
    else:
        group = LocalWorkerGroup(roles)
    try:
        group.call("workers", "build", config, roles, total_steps)
    except BaseException:
        group.shutdown()
        raise
    rollout = RolloutRole(group, rerank=config.rollout.data_rerank)
    return _launched(config, roles, group, group, rollout, rollout.sync_weights)


def _launched(
    config: Config,
    roles: tuple[str, ...],
    train: Any,
    group: Any,
    rollout: RolloutRole,
    sync_weights: Callable[[int], dict[str, float]],
) -> LaunchedRoles:
    actor_sp = replica_size(config, "actor")
    critic_sp = replica_size(config, "critic") if "critic" in roles else 1
    return LaunchedRoles(
        actor=TrainRole(train, "actor", actor_sp),
        rollout=rollout,
        ref=TrainRole(train, "ref", actor_sp) if "ref" in roles else None,
        critic=TrainRole(train, "critic", critic_sp) if "critic" in roles else None,
        sync_weights=sync_weights,
        group=group,
        teacher=TrainRole(train, "teacher", actor_sp) if "teacher" in roles else None,
    )


def _launch_split(
    config: Config, roles: tuple[str, ...], layout: RayLayout, total_steps: int
) -> LaunchedRoles:
    """Disaggregated: the train roles on the actor's devices, the rollout replicas on
    their own (`split_group`), both built at once, then joined by the weight group."""
    from rl.core.workers.ray_group import RayWorkerGroup, start_ray
    from rl.core.workers.replicas import RolloutReplicas
    from rl.core.workers.split_group import SplitGroup
    from rl.core.workers.worker import RolloutWorker

    check_divisible(config, layout.train_ranks)
    trainer, cuda = config.trainer, config.trainer.device == "cuda"
    start_ray(
        trainer.ray_address,
        num_cpus=None if cuda else max(2.0, layout.devices * layout.cpus_per_device),
    )
    common: dict[str, Any] = {
        "device_type": trainer.device,
        "cpus_per_worker": layout.cpus_per_device,
        "timeout_s": trainer.worker_timeout_s,
        "address": trainer.ray_address,
    }
    train_roles = tuple(role for role in roles if role != "rollout")
    train = RayWorkerGroup(train_roles, layout.train_ranks, **common)
    try:
        rollout_group = RayWorkerGroup(
            ("rollout",),
            layout.rollout_replicas,
            devices_per_worker=layout.rollout_tp,
            distributed=False,
            worker_class=RolloutWorker,
            **common,
        )
    except BaseException:
        train.shutdown()
        raise
    replicas: Any = rollout_group
    if trainer.rollout_restarts > 0:  # lost replicas are replaced, the rest go on meanwhile
        replicas = RolloutReplicas(
            rollout_group,
            trainer.rollout_restarts,
            (config, ("rollout",), total_steps),
            trainer.rollout_health_check_timeout_s,
        )
    group = SplitGroup(train, replicas)
    try:
        built = (
            train.start("build", config, train_roles, total_steps),
            rollout_group.start("build", config, ("rollout",), total_steps),
        )
        wait_together(
            [(train, built[0], "actor", "build"), (rollout_group, built[1], "rollout", "build")]
        )
        group.open_weight_group()
    except BaseException:
        group.shutdown()
        raise
    rollout = RolloutRole(replicas, rerank=config.rollout.data_rerank)
    return _launched(config, roles, train, group, rollout, group.push_weights)
