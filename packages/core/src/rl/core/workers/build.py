"""Build a role's engine from the config, through the engine registry (which checks the
engine class against its contract when it loads it)."""

from __future__ import annotations

from typing import Any

from rl.core.config import Config
from rl.core.engines import RolloutEngine, TrainEngine
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
    engine: RolloutEngine = engine_class.from_config(config, tokenizer)
    return engine
