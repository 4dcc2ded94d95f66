"""Everything one run needs, built once from the config: tokenizer, data, engines, rewards."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rl.core.config import Config
from rl.core.registry import load_engine_class


@dataclass
class RunContext:
    config: Config
    output_dir: Path
    tokenizer: Any
    train_data: Any
    val_data: Any
    sampler: Any
    reward: Any
    actor: Any
    rollout: Any
    ref: Any = None
    critic: Any = None
    # the actor's weights into the rollout engine(s) -> metrics (rl.core.workers.launch)
    sync_weights: Callable[[], dict[str, float]] | None = None
    workers: Any = None  # what launched the roles; `shutdown()` ends them

    @property
    def total_steps(self) -> int:
        return total_training_steps(self.config, self.sampler.steps_per_epoch)


def total_training_steps(config: Config, steps_per_epoch: int) -> int:
    if config.trainer.total_training_steps is not None:
        return config.trainer.total_training_steps
    return steps_per_epoch * config.trainer.total_epochs


def build_train_engine(config: Config, role: str, tokenizer: Any, total_steps: int) -> Any:
    """An actor/ref/critic engine of `actor.strategy`, found through the engine registry."""
    section = "critic" if role == "critic" else "actor"
    strategy = config.critic.strategy if role == "critic" else config.actor.strategy
    engine_class = load_engine_class(strategy, "train", key=f"{section}.strategy")
    return engine_class.from_config(
        config, role, tokenizer, total_steps=total_steps, responses_per_prompt=config.rollout.n
    )


def build_rollout_engine(config: Config, tokenizer: Any) -> Any:
    engine_class = load_engine_class(config.rollout.name, "rollout", key="rollout.name")
    return engine_class.from_config(config, tokenizer)
