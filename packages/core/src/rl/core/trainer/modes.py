"""What `trainer.mode: one_step_off` needs from the rest of the config: generation and
training overlap, so nothing may generate inside the update (ReMax's greedy baseline) and
the roles cannot take turns on a device by offloading each other (the offload keys of the
backend each role trains on)."""

from __future__ import annotations

from typing import Any

from rl.core.config import Config
from rl.core.errors import ConfigError

_OFFLOAD_KEYS = ("param_offload", "optimizer_offload", "grad_offload")


def check(config: Config) -> None:
    if config.trainer.mode != "one_step_off":
        return
    if config.algorithm.adv_estimator == "remax":
        raise ConfigError(
            "algorithm.adv_estimator = 'remax' with trainer.mode: one_step_off: ReMax's "
            "greedy baseline would generate while the next step's rollouts are generating"
        )
    roles: list[tuple[str, Any]] = [("actor", config.actor)]
    if config.uses_critic:
        roles.append(("critic", config.critic))
    for name, section in roles:
        backend = "megatron" if section.strategy == "megatron" else "fsdp_config"
        for key in _OFFLOAD_KEYS:
            if getattr(getattr(section, backend), key, False):
                raise ConfigError(
                    f"{name}.{backend}.{key} with trainer.mode: one_step_off: the rollout "
                    "generates while the actor trains, so they cannot take turns on a device "
                    "by offloading; turn offloading off or use trainer.mode: sync"
                )
