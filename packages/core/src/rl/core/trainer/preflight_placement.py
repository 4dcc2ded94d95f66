"""Preflight of the placement: the devices and worker processes a run asks for (the
`cluster` section) against what its launcher runs and what this machine has, before any
model loads. Nothing is run on fewer devices than asked without an error.

- `trainer.launcher=local`, and `rl sft` whatever the launcher, run every role in this one
  process on one device: a cluster or placement of more devices is refused, and so are
  per-role CPU shares (`cluster.num_cpus`), which only the Ray launcher gives.
- `trainer.launcher=ray` starts one worker per device of the actor (every role shares
  them; a placement that puts a role elsewhere is refused), each of
  `cluster.cpus_per_worker` CPUs. Without `trainer.ray_address` they all run on this
  machine: on `trainer.device=cuda` the workers must fit `torch.cuda.device_count()` GPUs,
  and on either device their CPUs must fit the CPUs this process may use (on
  `trainer.device=cpu` each "device" is a worker process). With an address, Ray's
  cluster is counted instead (a placement group it cannot place fails with what it has).

A refusal is one line: what was asked (our keys, which `rl train --from` follows with
the upstream ones), what the run has, and the exact overrides that shrink the run to
it — the cluster, the placement's device lists and every parallel size that must shrink
with them — checked to pass these checks before they are printed.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

from rl.core.config import Config, ConfigError
from rl.core.config.overrides import apply_overrides, render_overrides
from rl.core.placement import Placement
from rl.core.placement.ranks import format_ranks, parse_ranks
from rl.core.trainer.preflight_limits import check_rollout_devices
from rl.core.workers.launch import (
    check_divisible,
    cluster_placement,
    fit_world,
    needed_roles,
    ray_layout,
    ray_ranks,
    ray_world,
)

_EPSILON = 1e-9  # CPU shares are floats: 3 × 0.1 must fit 0.3


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity (a container's cpuset), else
    os.cpu_count()."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def visible_gpus() -> int:
    """torch.cuda.device_count(): the GPUs this process sees (CUDA_VISIBLE_DEVICES)."""
    import torch

    return torch.cuda.device_count()


def check_placement(config: Config, *, with_rl_roles: bool = True) -> None:
    """Raise a one-line `ConfigError` when the run would use fewer devices or processes
    than `config` asks for, or more than this machine has. `with_rl_roles=False` is
    `rl sft` (the actor alone, in this process)."""
    placement = cluster_placement(config)  # a bad placement is refused whatever the launcher
    if with_rl_roles:
        _check_restarts(config)
    if not with_rl_roles or config.trainer.launcher == "local":
        _one_process(config, placement, with_rl_roles)
        return
    world, cpus_each = ray_ranks(config)
    if config.trainer.ray_address:
        return  # Ray's cluster, not this machine, has the devices
    if config.cluster.num_cpus:
        _cpu_shares_fit(config, placement, cpus_each)
    else:
        _workers_fit(config, placement, world, cpus_each)


def _check_restarts(config: Config) -> None:
    """`trainer.rollout_restarts` replaces rollout replicas on devices of their own: where
    the rollout shares the actor's process, a lost replica is a lost train rank."""
    restarts = config.trainer.rollout_restarts
    if not restarts:
        return
    layout = ray_layout(config) if config.trainer.launcher == "ray" else None
    if layout is None or not layout.disaggregated:
        where = (
            "in this one process (trainer.launcher=local)"
            if config.trainer.launcher == "local"
            else "on the actor's devices"
        )
        raise ConfigError(
            f"trainer.rollout_restarts = {restarts} replaces lost rollout replicas that run "
            f"on devices of their own, but here the rollout runs {where}, so a lost replica "
            "is a lost train rank (the run ends and resumes from its last checkpoint): place "
            "the rollout on devices of its own (trainer.launcher=ray, cluster.placement) or "
            "set trainer.rollout_restarts=0"
        )


def used_devices(placement: Placement, roles: Sequence[str]) -> tuple[int, ...]:
    """The devices `roles` are placed on, together (none in CPU mode)."""
    return tuple(sorted({d for role in roles for d in placement.devices.get(role, ())}))


def _one_process(config: Config, placement: Placement, with_rl_roles: bool) -> None:
    who = (
        "trainer.launcher=local runs every role in this one process"
        if with_rl_roles
        else "rl sft trains in this one process"
    )
    if config.cluster.num_cpus:
        what = "pass trainer.launcher=ray, or remove" if with_rl_roles else "remove"
        raise ConfigError(
            f"cluster.num_cpus = {dict(config.cluster.num_cpus)}: CPU shares per role are "
            f"given by trainer.launcher=ray (one worker process with their sum), but {who}, "
            f"on all its threads: {what} cluster.num_cpus"
        )
    roles = needed_roles(config) if with_rl_roles else ("actor",)
    used = used_devices(placement, roles)
    if len(used) > 1:
        fix = shrink(config, placement, roles, 1, local=True, with_rl_roles=with_rl_roles)
        raise ConfigError(
            f"{_asked(config, used)}, but {who}, on one device: pass {render_overrides(fix)}"
            + (_ray_instead(config, len(used)) if with_rl_roles else "")
        )
    check_divisible(config, 1)  # a model copy over several ranks needs them


def _ray_instead(config: Config, devices: int) -> str:
    """`(or trainer.launcher=ray ...)` when the Ray launcher can run the same config here."""
    try:
        ray = apply_overrides(config, {"trainer.launcher": "ray"})
        world, cpus_each = ray_world(ray)
    except ConfigError:
        return ""
    if world != devices or world > _room(ray, cpus_each)[0]:
        return ""
    return f" (or trainer.launcher=ray: one worker process per device, {world} here)"


def _room(config: Config, cpus_each: float) -> tuple[int, str]:
    """(how many workers of `cpus_each` CPUs this machine runs, what it has, in words)."""
    cpus = usable_cpus()
    by_cpus = int(cpus / cpus_each + _EPSILON)
    cpu_words = f"{cpus} CPUs (cluster.cpus_per_worker = {cpus_each:g} each: room for {by_cpus})"
    if config.trainer.device != "cuda":
        return by_cpus, cpu_words
    gpus = visible_gpus()
    words = f"{gpus} GPU{'s' if gpus != 1 else ''} (torch.cuda.device_count())"
    if by_cpus < gpus:
        words += f" and {cpu_words}"
    return min(gpus, by_cpus), words


def _workers_fit(config: Config, placement: Placement, world: int, cpus_each: float) -> None:
    room, has = _room(config, cpus_each)
    if world <= room:
        return
    roles = needed_roles(config)
    extra: dict[str, Any] = {}
    if room == 0:  # not even one worker's CPUs
        extra["cluster.cpus_per_worker"] = usable_cpus()
        room = _room(apply_overrides(config, extra), usable_cpus())[0]
    fix = shrink(config, placement, roles, room, local=False, extra=extra)
    cpu = config.trainer.device == "cpu"
    nnodes = config.cluster.nnodes
    raise ConfigError(
        f"{_asked(config, used_devices(placement, roles))}"
        + (", each a worker process on trainer.device=cpu" if cpu else "")
        + f"; this machine has {has}: pass {render_overrides(fix)}"
        + (
            f" (or trainer.ray_address=auto to run on a Ray cluster of {nnodes} nodes)"
            if nnodes > 1
            else ""
        )
    )


def _cpu_shares_fit(config: Config, placement: Placement, total: float) -> None:
    """CPU mode (`cluster.num_cpus`): one worker with the roles' shares, on this machine."""
    cpus = usable_cpus()
    if total <= cpus + _EPSILON:
        return
    roles = needed_roles(config)
    shares = {role: placement.num_cpus[role] for role in roles if role in placement.num_cpus}
    scale = cpus / total
    fix: dict[str, Any] = {
        f"cluster.num_cpus.{role}": math.floor(share * scale * 100) / 100 or 0.01
        for role, share in shares.items()
    }
    whose = f"the shares of {', '.join(shares)}"
    if not shares:  # no role of the run has a share: the worker gets cpus_per_worker
        fix = {"cluster.cpus_per_worker": cpus}
        whose = "no role of the run has a share: cluster.cpus_per_worker"
    raise ConfigError(
        f"cluster.num_cpus = {dict(config.cluster.num_cpus)} asks for {total:g} CPUs in one "
        f"worker process ({whose}); this machine has {cpus}: pass {render_overrides(fix)}"
    )


def _asked(config: Config, used: Sequence[int]) -> str:
    cluster = config.cluster
    shape = f"cluster.n_gpus_per_node = {cluster.n_gpus_per_node}"
    if cluster.nnodes != 1:
        shape = f"cluster.nnodes = {cluster.nnodes} × {shape}"
    devices = f"{len(used)} device{'s' if len(used) != 1 else ''}"
    if len(used) == cluster.nnodes * cluster.n_gpus_per_node:
        return f"cluster asks for {devices} ({shape})"
    return (
        f"cluster asks for {devices} (cluster.{cluster.dialects()[0]} places the roles on "
        f"devices {format_ranks(used)} of {shape})"
    )


def shrink(
    config: Config,
    placement: Placement,
    roles: Sequence[str],
    room: int,
    *,
    local: bool,
    with_rl_roles: bool = True,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The overrides (key -> value) that run `config` on the most devices, at most `room`,
    at which it passes the placement checks: one node, the placement's device lists, the
    rollout's tensor parallelism and the train engines' parallel sizes shrunk with it."""
    used = len(used_devices(placement, roles))
    for devices in range(min(room, used), 0, -1):
        overrides = {**(extra or {}), **_shrunk(config, placement, devices)}
        try:
            _passes(apply_overrides(config, overrides), local, with_rl_roles)
        except ConfigError:
            continue
        return overrides
    return {**(extra or {}), **_shrunk(config, placement, 1)}


def _shrunk(config: Config, placement: Placement, devices: int) -> dict[str, Any]:
    cluster = config.cluster
    overrides: dict[str, Any] = {}
    if cluster.nnodes != 1:
        overrides["cluster.nnodes"] = 1
    if cluster.n_gpus_per_node != devices:
        overrides["cluster.n_gpus_per_node"] = devices
    overrides.update(_device_lists(config, placement, devices))
    tp = config.rollout.tensor_parallel_size
    if devices % tp:
        overrides["rollout.tensor_parallel_size"] = math.gcd(tp, devices)
    for role in ("actor", "critic") if config.uses_critic else ("actor",):
        overrides.update(fit_world(config, role, devices))
    return overrides


def _device_lists(config: Config, placement: Placement, devices: int) -> dict[str, Any]:
    """The placement entries that name devices beyond `devices`, set to all of them (the
    launchers run roles colocated; placement never changes the math)."""
    cluster = config.cluster
    if cluster.placement:
        return {
            f"cluster.placement.{role}": "all"
            for role, value in cluster.placement.items()
            if not _all(value) and max(placement.devices[role]) >= devices
        }
    total = cluster.nnodes * cluster.n_gpus_per_node
    beyond = [
        key
        for key, value in cluster.component_placement.items()
        if not _all(value) and max(parse_ranks(value, total, key)) >= devices
    ]
    overrides: dict[str, Any] = {
        f"cluster.component_placement.{key}": "all" for key in beyond if key.isidentifier()
    }
    joined = {key: "all" for key in beyond if not key.isidentifier()}  # "actor,rollout"
    if joined:
        overrides["cluster.component_placement"] = joined
    return overrides


def _all(value: Any) -> bool:
    return isinstance(value, str) and value.strip().lower() == "all"


def _passes(config: Config, local: bool, with_rl_roles: bool) -> None:
    """The checks a shrunk config must pass: the placement, the ranks per model copy and
    the batch split, the rollout's devices, and the train engines' own layout checks."""
    from rl.core.workers.build import preflight_train_engine

    cluster_placement(config)
    if local:
        check_divisible(config, 1)
    else:
        ray_world(config)
    if with_rl_roles:
        check_rollout_devices(config)
    for role in ("actor", "critic") if with_rl_roles and config.uses_critic else ("actor",):
        preflight_train_engine(config, role)
