"""Multi-step environments (ROLL / GEM style): `reset(task)` gives the first observation,
`step(action)` takes the model's text and returns the next observation, a reward for the
step and whether the episode is over. An environment is plain Python; the agent loop
turns its observations into tokens through the chat template (`ChatDelta`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


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
