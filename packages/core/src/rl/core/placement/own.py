"""Our own placement form: `cluster.placement`, role -> devices.

placement:
  actor: all          # or an int, a list of ints, or RLinf's "0-3,6-7" rank string
  rollout: all
  critic: [4, 5, 6, 7]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rl.core.placement.errors import PlacementError
from rl.core.placement.model import Placement
from rl.core.placement.ranks import parse_ranks
from rl.core.placement.roles import check_role
from rl.core.placement.validate import build_placement, check_cluster


def parse_own(
    placement: Mapping[str, Any],
    *,
    nnodes: int,
    n_gpus_per_node: int,
    tensor_parallel_size: int | None = None,
) -> Placement:
    """The `Placement` that `cluster.placement` (role -> devices) describes."""
    check_cluster(nnodes, n_gpus_per_node)
    devices: dict[str, tuple[int, ...]] = {}
    for role, value in placement.items():
        key = f"placement.{check_role(role)}"
        if isinstance(value, list | tuple):
            if any(isinstance(d, bool) or not isinstance(d, int) for d in value):
                raise PlacementError(f"{key} = {value!r} is not allowed: a list of device ints")
            devices[role] = tuple(value)
        else:
            devices[role] = parse_ranks(value, nnodes * n_gpus_per_node, key)
    return build_placement(
        devices,
        nnodes=nnodes,
        n_gpus_per_node=n_gpus_per_node,
        tensor_parallel_size=tensor_parallel_size,
    )
