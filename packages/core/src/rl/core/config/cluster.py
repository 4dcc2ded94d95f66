"""The `cluster` section: the cluster's shape and where each role runs.

Exactly one placement dialect may be given; `placement_from_cluster` reads it into a
`rl.core.placement.Placement`:

    placement            ours: role -> devices ("all", an int, [0, 1], "0-3,6-7")
    component_placement  RLinf: "actor,rollout": all / "0-3" / ...
    colocation           ChatLearn: [policy, policy_trainer, ref_policy], on every device
    hybrid_engine        verl: true puts actor, rollout and ref on every device
    num_cpus             CPU only: role -> CPUs (with total_cpus, optional, as the budget)

`nnodes` and `n_gpus_per_node` are verl's names (RLinf: num_nodes / num_gpus_per_node;
ROLL: num_gpus_per_node). ROLL's per-role device_mapping lives in each role's section in
ROLL and is read by `rl.core.placement.parse_roll`.

A run gets exactly the devices this section asks for, or a refusal before any model
loads (`rl.core.trainer.preflight_placement`): the local launcher runs one process on one
device, and the Ray launcher on this machine runs no more workers than its GPUs and CPUs
hold; the refusal gives the overrides that shrink the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rl.core.config.errors import FieldError
from rl.core.config.rules import (
    NON_NEGATIVE,
    POSITIVE,
    POSITIVE_INT,
    check_fields,
    optional,
    setting,
)
from rl.core.placement import (
    Placement,
    PlacementError,
    parse_chatlearn,
    parse_cpu,
    parse_own,
    parse_rlinf,
    parse_verl_hybrid,
)

DIALECT_KEYS = ("placement", "component_placement", "colocation", "hybrid_engine", "num_cpus")


@dataclass(frozen=True)
class ClusterConfig:
    nnodes: int = setting(1, POSITIVE_INT)
    # devices per node; with trainer.device=cpu each "device" is a worker process
    # (cpus_per_worker CPUs). 0: CPU only, with num_cpus. verl's default is 8, ours 1.
    n_gpus_per_node: int = setting(1, NON_NEGATIVE)
    placement: dict[str, Any] = field(default_factory=dict)  # role -> devices
    component_placement: dict[str, Any] = field(default_factory=dict)  # RLinf
    colocation: tuple[Any, ...] = ()  # ChatLearn
    hybrid_engine: bool = False  # verl
    num_cpus: dict[str, float] = field(default_factory=dict)  # role -> CPUs
    total_cpus: float | None = setting(None, optional(POSITIVE))  # the CPU budget num_cpus must fit
    # CPUs of each worker process (Ray launcher); may be < 1
    cpus_per_worker: float = setting(1.0, POSITIVE)
    # memory of one device in GiB for `rl plan`'s fit check (rl.core.plan); null: the GPU's
    # (torch.cuda) on trainer.device=cuda, this machine's RAM on cpu. No seed system has it.
    device_memory_gb: float | None = setting(None, optional(POSITIVE))

    def __post_init__(self) -> None:
        check_fields(self)
        for name in ("placement", "component_placement", "num_cpus"):
            if not isinstance(getattr(self, name), dict):
                raise FieldError(name, getattr(self, name), "a mapping")
        if not isinstance(self.hybrid_engine, bool):
            raise FieldError("hybrid_engine", self.hybrid_engine, "true or false")

    def dialects(self) -> tuple[str, ...]:
        """The placement keys this section sets (`DIALECT_KEYS` order)."""
        values = {
            "placement": self.placement,
            "component_placement": self.component_placement,
            "colocation": self.colocation,
            "hybrid_engine": self.hybrid_engine,
            "num_cpus": self.num_cpus,
        }
        return tuple(key for key in DIALECT_KEYS if values[key])


def placement_from_cluster(
    section: ClusterConfig, *, tensor_parallel_size: int | None = None
) -> Placement:
    """The validated `Placement` of the one dialect `section` sets.

    `tensor_parallel_size` (the rollout's) must divide the rollout's device count.
    Raises PlacementError when no dialect or more than one is set, or the placement is bad.
    """
    dialects = section.dialects()
    if len(dialects) != 1:
        given = f"{', '.join(dialects)} are all set" if dialects else "none is set"
        raise PlacementError(f"cluster: set exactly one of {', '.join(DIALECT_KEYS)}; {given}")
    nnodes, n_gpus, tp = section.nnodes, section.n_gpus_per_node, tensor_parallel_size
    match dialects[0]:
        case "placement":
            return parse_own(
                section.placement, nnodes=nnodes, n_gpus_per_node=n_gpus, tensor_parallel_size=tp
            )
        case "component_placement":
            return parse_rlinf(
                section.component_placement,
                num_nodes=nnodes,
                num_gpus_per_node=n_gpus,
                tensor_parallel_size=tp,
            )
        case "colocation":
            return parse_chatlearn(
                section.colocation, nnodes=nnodes, n_gpus_per_node=n_gpus, tensor_parallel_size=tp
            )
        case "hybrid_engine":
            return parse_verl_hybrid(
                True, nnodes=nnodes, n_gpus_per_node=n_gpus, tensor_parallel_size=tp
            )
    return parse_cpu(section.num_cpus, total_cpus=section.total_cpus)
