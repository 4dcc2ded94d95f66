"""Checks on a placement before anything starts; each error names the roles and devices."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from rl.core.placement.errors import PlacementError
from rl.core.placement.model import Placement
from rl.core.placement.roles import check_role


def build_placement(
    devices: Mapping[str, Iterable[int]],
    *,
    nnodes: int,
    n_gpus_per_node: int,
    tensor_parallel_size: int | None = None,
) -> Placement:
    """A validated `Placement` of `devices` (role -> global device indices) on the cluster.

    Refused: a bad cluster shape, an unknown role, a role with no devices or a device twice,
    a device beyond nnodes × n_gpus_per_node, two roles sharing some but not all devices,
    and a rollout whose device count `tensor_parallel_size` does not divide.
    """
    check_cluster(nnodes, n_gpus_per_node)
    if n_gpus_per_node == 0:
        raise PlacementError("n_gpus_per_node = 0 has no devices to place on; use num_cpus")
    placed = {check_role(role): _device_tuple(role, list(ds)) for role, ds in devices.items()}
    if not placed:
        raise PlacementError("the placement places no role")
    total = nnodes * n_gpus_per_node
    for role, ds in placed.items():
        beyond = [d for d in ds if d >= total]
        if beyond:
            raise PlacementError(
                f"role {role!r} is placed on devices {beyond}, beyond the cluster's {total} "
                f"(nnodes {nnodes} × n_gpus_per_node {n_gpus_per_node}: devices 0..{total - 1})"
            )
    if tensor_parallel_size is not None and "rollout" in placed:
        check_tensor_parallel(len(placed["rollout"]), tensor_parallel_size)
    return Placement(devices=placed, nnodes=nnodes, n_gpus_per_node=n_gpus_per_node)


# More devices than any cluster has (the largest hold a few hundred thousand GPUs): a count
# past it is a typo, refused before a placement lists its devices (a billion of them took
# tens of GB, an OOM, to validate).
MAX_DEVICES = 1 << 20


def check_cluster(nnodes: object, n_gpus_per_node: object) -> None:
    """nnodes >= 1 and n_gpus_per_node >= 0, both ints, at most `MAX_DEVICES` in all."""
    if isinstance(nnodes, bool) or not isinstance(nnodes, int) or nnodes < 1:
        raise PlacementError(f"nnodes = {nnodes!r} is not allowed: an int >= 1")
    if (
        isinstance(n_gpus_per_node, bool)
        or not isinstance(n_gpus_per_node, int)
        or n_gpus_per_node < 0
    ):
        raise PlacementError(f"n_gpus_per_node = {n_gpus_per_node!r} is not allowed: an int >= 0")
    if nnodes * n_gpus_per_node > MAX_DEVICES:
        raise PlacementError(
            f"nnodes × n_gpus_per_node = {nnodes} × {n_gpus_per_node} = "
            f"{nnodes * n_gpus_per_node} devices is not allowed: at most {MAX_DEVICES}"
        )


def _device_tuple(role: str, devices: list[int]) -> tuple[int, ...]:
    if not devices:
        raise PlacementError(f"role {role!r} is placed on no devices")
    for d in devices:
        if isinstance(d, bool) or not isinstance(d, int) or d < 0:
            raise PlacementError(f"role {role!r}: device {d!r} is not a device index (an int >= 0)")
    # counted once each (list.count per device was quadratic: minutes at 100K devices)
    twice = sorted(d for d, n in Counter(devices).items() if n > 1)
    if twice:
        raise PlacementError(f"role {role!r} lists devices {twice} more than once")
    return tuple(sorted(devices))


def check_tensor_parallel(n_devices: int, tensor_parallel_size: int) -> None:
    """Each rollout engine takes `tensor_parallel_size` devices, so it must divide the count."""
    if tensor_parallel_size < 1 or n_devices % tensor_parallel_size:
        raise PlacementError(
            f"rollout.tensor_parallel_size = {tensor_parallel_size} does not divide the "
            f"rollout's {n_devices} devices"
        )
