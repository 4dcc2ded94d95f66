"""Which Ray workers a placement asks for: the train ranks (the actor's devices, which the
reference and the critic share) and, when the rollout is placed on devices of its own,
its replicas (`rollout.tensor_parallel_size` devices each) — the disaggregated case of
verl's one-step-off trainer (`hybrid_engine=False`), ROLL's split `device_mapping`, RLinf's
disaggregated `component_placement` and ChatLearn's non-colocated models. A rollout on the
actor's devices is the hybrid engine: one replica per train rank, taking turns with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from rl.core.config import Config, ConfigError
from rl.core.placement import Placement


@dataclass(frozen=True)
class RayLayout:
    train_ranks: int  # one per device of the actor (ref and critic share them)
    rollout_replicas: int  # 0: each train rank hosts a replica (the hybrid engine)
    rollout_tp: int  # devices per rollout replica (rollout.tensor_parallel_size)
    cpus_per_device: float

    @property
    def disaggregated(self) -> bool:
        return self.rollout_replicas > 0

    @property
    def devices(self) -> int:
        """Devices (on CPU: worker processes of `cpus_per_device` CPUs) the run uses."""
        return self.train_ranks + self.rollout_replicas * self.rollout_tp


def layout_of(config: Config, placement: Placement, roles: tuple[str, ...]) -> RayLayout:
    """The workers of `placement` for `roles`; a split the launcher cannot run is refused
    naming the placement key."""
    key = f"cluster.{config.cluster.dialects()[0]}" if config.cluster.dialects() else "cluster"
    tp, cpus = config.rollout.tensor_parallel_size, config.cluster.cpus_per_worker
    actor = placement.devices.get("actor")
    if not actor:
        raise ConfigError(f"{key}: the actor is not placed on any device")
    for role in ("ref", "critic"):
        devices = placement.devices.get(role)
        if role in roles and devices is not None and tuple(devices) != tuple(actor):
            raise ConfigError(
                f"{key}: {role} on devices {list(devices)}, the actor on {list(actor)}: with "
                f"trainer.launcher=ray the {role} runs on the actor's devices, taking turns "
                f"with it; place it on {list(actor)}"
            )
    rollout = tuple(placement.devices.get("rollout") or actor)
    if rollout == tuple(actor):
        return RayLayout(len(actor), 0, tp, cpus)
    shared = sorted(set(rollout) & set(actor))
    if shared:
        raise ConfigError(
            f"{key}: the rollout on devices {list(rollout)} shares {shared} with the actor on "
            f"{list(actor)}: place the rollout on the actor's devices (they take turns) or on "
            "devices of its own (they run side by side)"
        )
    if len(rollout) % tp:
        raise ConfigError(
            f"rollout.tensor_parallel_size = {tp}: the rollout's {len(rollout)} devices "
            f"({key}) do not split into replicas of {tp}; use a divisor of {len(rollout)}"
        )
    return RayLayout(len(actor), len(rollout) // tp, tp, cpus)
