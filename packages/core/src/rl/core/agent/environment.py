"""Multi-step environments (ROLL / GEM style): `reset(task)` gives the first observation,
`step(action)` takes the model's text and returns the next observation, a reward for the
step and whether the episode is over. An environment is plain Python; the agent loop
turns its observations into tokens through the chat template (`ChatDelta`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rl.core.errors import ConfigError
from rl.core.imports import load_user_file


@dataclass(frozen=True)
class EnvStep:
    observation: str
    reward: float = 0.0
    done: bool = False
    info: dict[str, Any] = field(default_factory=dict)


class Environment(Protocol):
    def reset(self, task: Any) -> str: ...

    def step(self, action: str) -> EnvStep: ...


class GuessNumber:
    """A toy multi-step environment: find a hidden number in [low, high]; each guess is
    answered "higher" / "lower" (reward 0) or "correct" (reward 1, done)."""

    def __init__(self, low: int = 0, high: int = 9) -> None:
        self.low, self.high, self.secret = low, high, low

    def reset(self, task: Any) -> str:
        self.secret = int(task)
        if not self.low <= self.secret <= self.high:
            raise ValueError(f"secret {self.secret} outside [{self.low}, {self.high}]")
        return f"guess a number from {self.low} to {self.high}"

    def step(self, action: str) -> EnvStep:
        digits = "".join(ch for ch in action if ch.isdigit())
        if not digits:
            return EnvStep("say a number", 0.0, False, {"invalid": True})
        guess = int(digits)
        if guess == self.secret:
            return EnvStep("correct", 1.0, True)
        return EnvStep("higher" if guess < self.secret else "lower", 0.0, False)


BUILTIN_ENVIRONMENTS: dict[str, Callable[[], Environment]] = {"guess_number": GuessNumber}
_KEY = "rollout.multi_turn.environment"


@functools.cache
def load_environment(spec: str) -> Callable[[], Environment]:
    """The environment class `spec` names: a built-in one, or `file.py:ClassName` (its
    constructor takes no arguments). ConfigError naming the key for anything else. The
    file runs once per process (preflight checks it; every step's rollouts reuse it)."""
    if spec in BUILTIN_ENVIRONMENTS:
        return BUILTIN_ENVIRONMENTS[spec]
    path, colon, name = spec.rpartition(":")
    if not colon or not path.endswith(".py"):
        raise ConfigError(
            f"{_KEY} = {spec!r}: name a built-in environment "
            f"({', '.join(BUILTIN_ENVIRONMENTS)}) or a class as path/to/file.py:ClassName"
        )
    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"{_KEY} = {spec!r}: {file} does not exist")
    module = load_user_file(file, f"rl_environment_{file.stem}", _KEY)
    found = getattr(module, name, None)
    if not callable(found) or not all(hasattr(found, m) for m in ("reset", "step")):
        raise ConfigError(
            f"{_KEY} = {spec!r}: {file} has no class {name!r} with reset(task) and step(action)"
        )
    return found
