"""The placement model: which devices each role runs on, and which roles take turns.

Devices are global indices, node-major: device `d` is GPU `d % n_gpus_per_node` of node
`d // n_gpus_per_node`. Roles that sit on exactly the same devices form a colocation
group and take turns (offloading between phases); roles on disjoint devices run side by
side. Partial overlap is refused (see `validate.py`). In CPU mode (`n_gpus_per_node == 0`)
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
        """Groups (two roles or more) on exactly the same devices, each in `ROLES` order."""
        groups: dict[tuple[int, ...], list[str]] = {}
        for role in self.roles:
            if self.devices[role]:
                groups.setdefault(self.devices[role], []).append(role)
        return tuple(tuple(group) for group in groups.values() if len(group) > 1)

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
