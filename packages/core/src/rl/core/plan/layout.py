"""Where the roles run, as the plan counts them: the train ranks, the rollout's devices and
the devices grouped by the roles they host (`trainer.launcher: local` runs every role on one
device; the Ray launcher runs the train roles data-parallel over the actor's devices and
the rollout on its own devices, colocated or not; CPU mode, `cluster.num_cpus`, runs one
worker)."""

from __future__ import annotations

from dataclasses import dataclass

from rl.core.config import Config
from rl.core.placement import Placement

TRAIN_ROLES = ("actor", "ref", "critic")


@dataclass(frozen=True)
class Layout:
    placement: Placement
    roles: tuple[str, ...]  # the roles this run needs
    train_ranks: int  # ranks the train roles run on (the actor's devices)
    rollout_devices: int
    # devices that host the same roles: (devices, roles); one entry per distinct role set
    groups: tuple[tuple[tuple[int, ...], tuple[str, ...]], ...]

    @property
    def one_device(self) -> bool:
        return self.groups == (((0,), self.roles),)


def layout(config: Config, placement: Placement, roles: tuple[str, ...]) -> Layout:
    """The plan's view of `placement` for `config.trainer.launcher`."""
    if config.trainer.launcher == "local" or placement.n_gpus_per_node == 0:
        return Layout(placement, roles, 1, 1, (((0,), roles),))
    actor = placement.devices.get("actor", ())
    on_device: dict[int, list[str]] = {}
    for role in roles:
        # the train roles run data-parallel over the actor's devices (ref and critic with it)
        devices = actor if role in TRAIN_ROLES else placement.devices.get(role, ())
        for device in devices:
            on_device.setdefault(device, []).append(role)
    by_roles: dict[tuple[str, ...], list[int]] = {}
    for device in sorted(on_device):
        by_roles.setdefault(tuple(on_device[device]), []).append(device)
    groups = tuple((tuple(devices), role_set) for role_set, devices in by_roles.items())
    rollout = placement.devices.get("rollout", actor)
    return Layout(placement, roles, max(1, len(actor)), max(1, len(rollout)), groups)
