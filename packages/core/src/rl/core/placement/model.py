"""The placement model: which devices each role runs on, and which roles take turns.

Devices are global indices, node-major: device `d` is GPU `d % n_gpus_per_node` of node
`d // n_gpus_per_node`. Roles that share devices form a colocation group and take turns
(offloading between phases); roles on disjoint devices run side by side. Sharing may be
partial, as ROLL and RLinf configs do (trainer on 0-7, generation on 0-15): the group is
every role connected through a shared device, and it takes turns on the union of their
devices. In CPU mode (`n_gpus_per_node == 0`)
no role has devices and `num_cpus` says each role's CPU share.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rl.core.placement.roles import ROLES


@dataclass(frozen=True)
class Placement:
    """role -> devices, the colocation groups derived from them, and the cluster shape.

    Build one with `build_placement` (or a dialect parser), which validates it.
    """

    devices: Mapping[str, tuple[int, ...]]
    nnodes: int = 1
    n_gpus_per_node: int = 0
    num_cpus: Mapping[str, float] = field(default_factory=dict)

    @property
    def roles(self) -> tuple[str, ...]:
        """The placed roles, in `ROLES` order."""
        return tuple(role for role in ROLES if role in self.devices)

    @property
    def colocation(self) -> tuple[tuple[str, ...], ...]:
        """Groups (two roles or more) connected through shared devices, each in `ROLES`
        order: the roles of a group take turns on the union of their devices."""
        group_of = {role: {role} for role in self.roles if self.devices[role]}
        for a in group_of:
            for b in group_of:
                if group_of[a] is not group_of[b] and set(self.devices[a]) & set(self.devices[b]):
                    merged = group_of[a] | group_of[b]
                    for role in merged:
                        group_of[role] = merged
        groups = {id(group): group for group in group_of.values() if len(group) > 1}
        ordered = [tuple(r for r in self.roles if r in group) for group in groups.values()]
        return tuple(sorted(ordered, key=lambda group: self.roles.index(group[0])))

    @property
    def n_devices(self) -> int:
        """Devices in the cluster: nnodes × n_gpus_per_node."""
        return self.nnodes * self.n_gpus_per_node

    def node_of(self, device: int) -> int:
        """The node that global `device` is on (node-major numbering)."""
        return device // self.n_gpus_per_node

    def nodes_of(self, role: str) -> tuple[int, ...]:
        """The nodes `role` spans, ascending."""
        return tuple(sorted({self.node_of(d) for d in self.devices[role]}))

    def colocated_with(self, role: str) -> tuple[str, ...]:
        """The other roles that take turns with `role` on its devices."""
        for group in self.colocation:
            if role in group:
                return tuple(other for other in group if other != role)
        return ()
