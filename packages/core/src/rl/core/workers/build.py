"""Build a role's engine from the config, through the engine registry (which checks the
engine class against its contract when it loads it)."""

from __future__ import annotations

from typing import Any

from rl.core.config import Config
from rl.core.engine_contract import declares
from rl.core.engines import RecordsRoutes, ReplaysRoutes, RolloutEngine, TrainEngine
from rl.core.models.routing_replay import RoutingReplayError
from rl.core.registry import load_engine_class


def train_engine_class(config: Config, role: str) -> Any:
    """The class of the `role` engine ("actor", "ref", "critic"): `actor.strategy`'s, the
    critic's `critic.strategy`'s."""
    section = "critic" if role == "critic" else "actor"
    strategy = config.critic.strategy if section == "critic" else config.actor.strategy
    return load_engine_class(strategy, "train", key=f"{section}.strategy")


def build_train_engine(config: Config, role: str, tokenizer: Any, total_steps: int) -> TrainEngine:
    """An actor/ref/critic engine of `actor.strategy` (the critic's: `critic.strategy`); the
    distillation teacher is a reference engine of its own model (`teacher.teacher_engine`)."""
    if role == "actor":
        _check_router_replay(config, train_engine_class(config, role))
    if role == "teacher":
        from rl.core.workers.teacher import teacher_config

        config, role = teacher_config(config, tokenizer), "ref"
    engine: TrainEngine = train_engine_class(config, role).from_config(
        config, role, tokenizer, total_steps=total_steps, responses_per_prompt=config.rollout.n
    )
    return engine


def build_rollout_engine(config: Config, tokenizer: Any) -> RolloutEngine:
    """The rollout engine `rollout.name`."""
    engine_class = load_engine_class(config.rollout.name, "rollout", key="rollout.name")
    records = config.actor.router_replay.mode == "R3"
    if records and not declares(engine_class, RecordsRoutes):
        raise RoutingReplayError(
            f"actor.router_replay.mode=R3 replays the routes the rollout engine records; "
            f"rollout.name={config.rollout.name} does not record them (rollout.name=hf does; "
            "or mode R2 records them in the old-log-prob pass)"
        )
    engine: RolloutEngine = engine_class.from_config(config, tokenizer)
    if records:
        engine.record_routes(True)  # type: ignore[attr-defined]
    return engine


def _check_router_replay(config: Config, engine_class: Any) -> None:
    """Refuse, by name, a routing replay the actor's engine or the algorithm cannot run."""
    mode = config.actor.router_replay.mode
    if mode == "disabled":
        return
    if not declares(engine_class, ReplaysRoutes):
        raise RoutingReplayError(
            f"actor.router_replay.mode={mode}: actor.strategy={config.actor.strategy} does "
            "not replay MoE routes (actor.strategy=fsdp does)"
        )
    if mode == "R3" and (config.rollout.multi_turn.enable or config.trainer.partial_rollout):
        key = "rollout.multi_turn.enable" if config.rollout.multi_turn.enable else "trainer."
        key += "" if config.rollout.multi_turn.enable else "partial_rollout"
        raise RoutingReplayError(
            f"actor.router_replay.mode=R3 with {key}=true: those rollouts are put together "
            "from several generate calls, and their routes are not carried yet (use R2)"
        )
    if mode == "R2" and config.algorithm.rollout_correction.bypass_mode:
        raise RoutingReplayError(
            "actor.router_replay.mode=R2 records the routes in the old-log-prob pass, which "
            "algorithm.rollout_correction.bypass_mode=true skips (as verl refuses it)"
        )
