"""ChatLearn's `runtime_args.colocation` and verl's `hybrid_engine`: everything colocated.

ChatLearn lists the models that share all devices and run in turn:

    runtime_args:
      colocation: [policy, policy_trainer, ref_policy]

(older configs: a list of groups, or "a,b,c" strings). ChatLearn supports one group only
("non-colocation is not supported yet" in its docs); so does this form (the ChatLearn
importer turns several groups, or models outside every group, into `cluster.placement`
as ChatLearn 1.2's ModelManager places them). verl's hybrid engine puts
actor, rollout and ref on every device of `trainer.nnodes` × `trainer.n_gpus_per_node`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rl.core.placement.errors import PlacementError
from rl.core.placement.model import Placement
from rl.core.placement.roles import lookup_role
from rl.core.placement.validate import build_placement, check_cluster

# policy_trainer / ppo_policy train the policy; policy generates; value and ppo_value are
# the critic's inference and training halves in ChatLearn's older PPO examples.
CHATLEARN_ROLES = {
    "policy": "rollout",
    "policy_trainer": "actor",
    "ppo_policy": "actor",
    "ref_policy": "ref",
    "reference": "ref",
    "reward": "reward",
    "value": "critic",
    "ppo_value": "critic",
    "critic": "critic",
}
CHATLEARN_UNSUPPORTED = {
    "rollout_manager": "ChatLearn's rollout manager runs on CPU, not placed here"
}
VERL_HYBRID_ROLES = ("actor", "rollout", "ref")


def colocation_groups(colocation: Sequence[Any]) -> list[list[str]]:
    """ChatLearn's `colocation` in its three shapes as a list of groups of names."""
    if colocation and all(isinstance(name, str) and "," not in name for name in colocation):
        return [list(colocation)]
    groups = []
    for group in colocation:
        if not isinstance(group, str | list | tuple):
            raise PlacementError(
                f"cluster.colocation holds {group!r}: each entry is a role name, "
                "'a,b' or a list of role names"
            )
        names = group.split(",") if isinstance(group, str) else list(group)
        groups.append([str(name).strip() for name in names])
    return groups


def parse_chatlearn(
    colocation: Sequence[Any],
    *,
    nnodes: int,
    n_gpus_per_node: int,
    tensor_parallel_size: int | None = None,
) -> Placement:
    """The `Placement` of ChatLearn's one colocation group on every device."""
    check_cluster(nnodes, n_gpus_per_node)
    groups = colocation_groups(colocation)
    if len(groups) != 1:
        raise PlacementError(
            f"colocation = {list(colocation)!r}: exactly one colocation group is supported yet "
            f"(got {len(groups)})"
        )
    every = tuple(range(nnodes * n_gpus_per_node))
    devices: dict[str, tuple[int, ...]] = {}
    for name in groups[0]:
        # two ChatLearn names of one role (value, ppo_value) in one group are one role here
        devices[lookup_role(name, CHATLEARN_ROLES, CHATLEARN_UNSUPPORTED, "ChatLearn")] = every
    return build_placement(
        devices,
        nnodes=nnodes,
        n_gpus_per_node=n_gpus_per_node,
        tensor_parallel_size=tensor_parallel_size,
    )


def parse_verl_hybrid(
    hybrid_engine: bool,
    *,
    nnodes: int,
    n_gpus_per_node: int,
    tensor_parallel_size: int | None = None,
) -> Placement:
    """verl's hybrid engine: actor, rollout and ref on every device, taking turns."""
    if hybrid_engine is not True:
        raise PlacementError(
            f"hybrid_engine = {hybrid_engine!r} is not allowed: only true (verl's only mode); "
            "place roles apart with `placement` instead"
        )
    check_cluster(nnodes, n_gpus_per_node)
    every = tuple(range(nnodes * n_gpus_per_node))
    return build_placement(
        dict.fromkeys(VERL_HYBRID_ROLES, every),
        nnodes=nnodes,
        n_gpus_per_node=n_gpus_per_node,
        tensor_parallel_size=tensor_parallel_size,
    )
