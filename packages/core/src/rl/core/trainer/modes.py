"""What `trainer.mode: one_step_off` needs from the rest of the config: generation and
training overlap, so nothing may generate inside the update (ReMax's greedy baseline) and
the roles cannot take turns on a device by offloading each other (the keys each role's
engine names, `Offloading.offload_keys`); and what partial rollouts need."""

from __future__ import annotations

from rl.core.config import Config
from rl.core.engine_contract import declares
from rl.core.engines import Offloading
from rl.core.errors import ConfigError
from rl.core.workers.build import role_spec, train_engine_class


def check(config: Config) -> None:
    trainer = config.trainer
    if trainer.mode == "async" and trainer.max_staleness < trainer.sync_every - 1:
        raise ConfigError(
            f"trainer.max_staleness = {trainer.max_staleness} with trainer.sync_every = "
            f"{trainer.sync_every}: between two weight pushes the rollouts lag up to "
            "sync_every - 1 updates; raise max_staleness or lower sync_every"
        )
    if trainer.partial_rollout:
        _check_partial(config)
    if trainer.mode == "sync" or (trainer.mode == "async" and trainer.max_staleness == 0):
        return  # nothing overlaps
    if config.algorithm.adv_estimator == "remax":
        raise ConfigError(
            f"algorithm.adv_estimator = 'remax' with trainer.mode: {trainer.mode}: ReMax's "
            "greedy baseline would generate while the next step's rollouts are generating"
        )
    for role in ("actor", "critic") if config.uses_critic else ("actor",):
        engine_class = train_engine_class(config, role)
        offloading = declares(engine_class, Offloading)
        keys = engine_class.offload_keys(role_spec(config, role)) if offloading else ()
        if keys:
            raise ConfigError(
                f"{keys[0]} with trainer.mode: {trainer.mode}: the rollout generates while "
                "the actor trains, so they cannot take turns on a device by offloading; turn "
                "offloading off or use trainer.mode: sync"
            )


def _check_partial(config: Config) -> None:
    if config.trainer.mode == "sync":
        raise ConfigError(
            "trainer.partial_rollout needs trainer.mode: one_step_off or async (in sync mode "
            "no weight push can land during a generation)"
        )
    if config.rollout.multi_turn.enable:
        raise ConfigError(
            "trainer.partial_rollout with rollout.multi_turn.enable: agentic rollouts are "
            "not generated in pieces (yet); turn one of them off"
        )
    if config.rollout.min_new_tokens:
        raise ConfigError(
            f"trainer.partial_rollout with rollout.min_new_tokens = "
            f"{config.rollout.min_new_tokens}: a minimum length cannot be kept across pieces; "
            "set it to 0"
        )
