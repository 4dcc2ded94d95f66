"""verl's roles on their own devices: the separate resource pools of its one-step-off and
fully-async trainers, as our `cluster.placement`.

verl's plain `main_ppo` runs the hybrid engine only (its `RayPPOTrainer` asserts
`actor_rollout_ref.hybrid_engine`). Its one-step-off trainer
(`verl.experimental.one_step_off_policy.main_ppo`) and fully-async trainer
(`verl.experimental.fully_async_policy.fully_async_main`) assert the opposite, and their
configs add a top-level `rollout` section with a pool of its own:

    trainer.nnodes × trainer.n_gpus_per_node    actor, ref, critic (the trainer pool)
    rollout.nnodes × rollout.n_gpus_per_node    the rollout (its own pool)

That top-level section is what tells the two trainers' configs apart from `ppo_trainer`'s
(which has none; Hydra refuses `rollout.nnodes=...` there). Both pools become one cluster:
on the same nodes (`trainer.nnodes == rollout.nnodes`) each node holds T trainer devices
then R rollout devices (n_gpus_per_node = T + R); on nodes of their own (T == R) the
trainer's nodes come first. Devices are numbered node-major, as `rl.core.placement` does.
The trainer runs one step off (fully async: ahead by up to trainer.max_staleness); a
placement of several devices runs on the Ray launcher (`rl.cli.convert_cmd`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rl.core.config.errors import ConfigError

Flat = Mapping[str, Any]

HYBRID = "actor_rollout_ref.hybrid_engine"
ONE_STEP_OFF = "verl.experimental.one_step_off_policy.main_ppo"
# the estimators verl's one-step-off trainer runs (its utils.need_critic raises
# NotImplementedError for any other)
ONE_STEP_OFF_ESTIMATORS = (
    "gae",
    "grpo",
    "grpo_passk",
    "reinforce_plus_plus",
    "rloo",
    "opo",
    "reinforce_plus_plus_baseline",
    "gpg",
)


def separate_pools(flat: Flat) -> bool:
    """Whether the config is one of verl's separate-pool trainers' (a top-level `rollout`
    section with its own devices)."""
    return "rollout.n_gpus_per_node" in flat or "rollout.nnodes" in flat


def fully_async(flat: Flat) -> bool:
    return any(key.startswith("async_training.") for key in flat)


def _pools(flat: Flat) -> tuple[int, int, int, int]:
    """(trainer nodes, trainer devices per node, rollout nodes, rollout devices per node)."""
    return (
        int(flat.get("trainer.nnodes", 1)),
        int(flat.get("trainer.n_gpus_per_node", 8)),
        int(flat.get("rollout.nnodes", 1)),
        int(flat.get("rollout.n_gpus_per_node", 8)),
    )


def _same_nodes(flat: Flat) -> bool:
    trainer_nodes, _, rollout_nodes, _ = _pools(flat)
    return trainer_nodes == rollout_nodes


def nnodes(flat: Flat) -> int | None:
    """Our cluster.nnodes: the trainer's, plus the rollout's nodes when they are its own."""
    trainer_nodes, _, rollout_nodes, _ = _pools(flat)
    if not separate_pools(flat):
        return trainer_nodes
    return trainer_nodes if _same_nodes(flat) else trainer_nodes + rollout_nodes


def n_gpus_per_node(flat: Flat) -> int | None:
    """Our cluster.n_gpus_per_node: both pools' devices of a node, or the trainer's."""
    _, trainer_gpus, _, rollout_gpus = _pools(flat)
    if not separate_pools(flat):
        return trainer_gpus
    return trainer_gpus + rollout_gpus if _same_nodes(flat) else trainer_gpus


def _devices(flat: Flat, pool: str) -> list[int]:
    trainer_nodes, trainer_gpus, rollout_nodes, rollout_gpus = _pools(flat)
    if _same_nodes(flat):
        width = trainer_gpus + rollout_gpus
        first, count = (0, trainer_gpus) if pool == "trainer" else (trainer_gpus, rollout_gpus)
        return [node * width + first + i for node in range(trainer_nodes) for i in range(count)]
    if pool == "trainer":
        return list(range(trainer_nodes * trainer_gpus))
    start = trainer_nodes * trainer_gpus
    return list(range(start, start + rollout_nodes * rollout_gpus))


def trainer_devices(flat: Flat) -> list[int] | None:
    """The trainer pool's devices (actor, ref, critic), None for the hybrid engine."""
    return _devices(flat, "trainer") if separate_pools(flat) else None


def rollout_devices(flat: Flat) -> list[int] | None:
    """The rollout pool's devices, None for the hybrid engine."""
    return _devices(flat, "rollout") if separate_pools(flat) else None


def ref_devices(flat: Flat) -> list[int] | None:
    """The trainer pool, where verl runs a reference (a KL loss or a KL penalty)."""
    wanted = flat.get("actor_rollout_ref.actor.use_kl_loss") or flat.get(
        "algorithm.use_kl_in_reward"
    )
    return trainer_devices(flat) if wanted else None


def critic_devices(flat: Flat) -> list[int] | None:
    """The trainer pool, where verl runs a critic (GAE)."""
    return trainer_devices(flat) if flat.get("algorithm.adv_estimator") == "gae" else None


def mode(flat: Flat) -> str | None:
    """Our trainer.mode for the separate-pool trainers (None: the hybrid engine's sync)."""
    if not separate_pools(flat):
        return None
    return "async" if fully_async(flat) else "one_step_off"


def check(flat: Flat) -> None:
    """What verl itself refuses about the two pools, refused by name before mapping."""
    hybrid = flat.get(HYBRID, True)
    if not separate_pools(flat):
        if hybrid is False:
            raise ConfigError(
                f"{HYBRID} = False: verl.trainer.main_ppo runs the hybrid engine only "
                "(its trainer asserts it); for the rollout on devices of its own run "
                f"{ONE_STEP_OFF} (its rollout.nnodes / rollout.n_gpus_per_node), or set "
                f"{HYBRID}=True"
            )
        return
    if hybrid is not False:
        trainer = "fully-async" if fully_async(flat) else "one-step-off"
        raise ConfigError(
            f"{HYBRID} = {hybrid!r}: verl's {trainer} trainer runs the rollout on devices of "
            f"its own (rollout.n_gpus_per_node) and asserts it is off; pass {HYBRID}=False"
        )
    for key in ("trainer.nnodes", "trainer.n_gpus_per_node", "rollout.nnodes"):
        if int(flat.get(key, 1)) <= 0:
            raise ConfigError(f"{key} = {flat.get(key)!r}: verl asserts it is greater than 0")
    if int(flat.get("rollout.n_gpus_per_node", 8)) <= 0:
        raise ConfigError(
            f"rollout.n_gpus_per_node = {flat.get('rollout.n_gpus_per_node')!r}: verl "
            "asserts it is greater than 0"
        )
    trainer_nodes, trainer_gpus, rollout_nodes, rollout_gpus = _pools(flat)
    if trainer_nodes != rollout_nodes and trainer_gpus != rollout_gpus:
        raise ConfigError(
            f"trainer.nnodes = {trainer_nodes} × trainer.n_gpus_per_node = {trainer_gpus} "
            f"and rollout.nnodes = {rollout_nodes} × rollout.n_gpus_per_node = "
            f"{rollout_gpus}: rl places the pools on the same nodes (equal nnodes) or on "
            "nodes of one size (equal n_gpus_per_node); make one pair equal"
        )
    estimator = flat.get("algorithm.adv_estimator")
    if not fully_async(flat) and estimator not in ONE_STEP_OFF_ESTIMATORS:
        raise ConfigError(
            f"algorithm.adv_estimator = {estimator!r}: verl's one-step-off trainer does not "
            f"run it (its need_critic knows {', '.join(ONE_STEP_OFF_ESTIMATORS)})"
        )
