"""RLinf's `cluster.component_placement`: comma-separated component names -> ranks.

    cluster:
      num_nodes: 8
      component_placement:
        rollout: 0-15          # ranks: "all" | int | "a-b" | comma list ("0-1,4-5")
        inference: 16-23
        actor: 24-63
        reward: 0-15
        actor,rollout: all     # one key may place several components on the same ranks

Supported: the flat form above. Not yet: the node-group form (a mapping with
`node_group` / `placement`) and process ranks (`"0-3:0-7"`). RLinf's `inference` is a
dedicated forward-only worker for the actor's and reference log-probs, our `ref` role.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rl.core.placement.errors import PlacementError
from rl.core.placement.model import Placement
from rl.core.placement.ranks import parse_ranks
from rl.core.placement.roles import add_role, lookup_role
from rl.core.placement.validate import build_placement, check_cluster

RLINF_ROLES = {
    "actor": "actor",
    "rollout": "rollout",
    "inference": "ref",
    "critic": "critic",
    "reward": "reward",
}
RLINF_UNSUPPORTED = {
    "env": "embodied environments (simulators, robots) have no role here",
    "agent": "agent workers have no role here",
    "reward_server": "a remote reward server has no role here",
    "rollout_judge": "an LLM-judge rollout has no role here",
}


def parse_rlinf(
    component_placement: Mapping[str, Any],
    *,
    num_nodes: int,
    num_gpus_per_node: int,
    tensor_parallel_size: int | None = None,
) -> Placement:
    """The `Placement` RLinf's `cluster.component_placement` describes."""
    check_cluster(num_nodes, num_gpus_per_node)
    devices: dict[str, tuple[int, ...]] = {}
    sources: dict[str, str] = {}
    for names, value in component_placement.items():
        key = f"component_placement.{names}"
        if isinstance(value, Mapping):
            raise PlacementError(
                f"{key}: the node-group form (node_group / placement) is not supported yet; "
                'give the ranks directly, e.g. "0-3"'
            )
        if isinstance(value, str) and ":" in value:
            raise PlacementError(
                f"{key} = {value!r}: process ranks (resource:process) are not supported yet; "
                "give the device ranks only"
            )
        ranks = parse_ranks(value, num_nodes * num_gpus_per_node, key)
        for name in str(names).split(","):
            role = lookup_role(name.strip(), RLINF_ROLES, RLINF_UNSUPPORTED, "RLinf")
            add_role(devices, role, ranks, key, sources)
    return build_placement(
        devices,
        nnodes=num_nodes,
        n_gpus_per_node=num_gpus_per_node,
        tensor_parallel_size=tensor_parallel_size,
    )
