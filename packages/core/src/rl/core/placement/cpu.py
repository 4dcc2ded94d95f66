"""CPU mode, for tests and laptops: no devices, each role gets a share of the CPUs.

cluster:
  num_cpus: {actor: 1, rollout: 1, ref: 0.5}
  total_cpus: 4        # optional: the shares must fit
"""

from __future__ import annotations

from collections.abc import Mapping

from rl.core.placement.errors import PlacementError
from rl.core.placement.model import Placement
from rl.core.placement.roles import check_role


def parse_cpu(num_cpus: Mapping[str, float], *, total_cpus: float | None = None) -> Placement:
    """The CPU-only `Placement`: role -> CPU share (> 0), whose sum fits `total_cpus` if given."""
    if not num_cpus:
        raise PlacementError("num_cpus places no role: give role -> CPUs, e.g. {actor: 1}")
    shares: dict[str, float] = {}
    for role, cpus in num_cpus.items():
        check_role(role)
        if isinstance(cpus, bool) or not isinstance(cpus, int | float) or cpus <= 0:
            raise PlacementError(f"num_cpus.{role} = {cpus!r} is not allowed: a number > 0")
        shares[role] = float(cpus)
    if total_cpus is not None and sum(shares.values()) > total_cpus:
        raise PlacementError(
            f"num_cpus asks for {sum(shares.values()):g} CPUs ({shares}) but total_cpus is "
            f"{total_cpus:g}"
        )
    return Placement(devices=dict.fromkeys(shares, ()), n_gpus_per_node=0, num_cpus=shares)
