"""One agent trajectory, token in / token out: `response_ids` are every token after the
prompt exactly as the model saw them (its own samples and the tool / environment turns,
never re-tokenised text), `loss_mask` says which the model produced (1) and which came
from outside (0), and `logprobs` are the rollout engine's for the model's tokens (0.0
elsewhere)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Trajectory:
    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)  # per environment step, if any
    turns: int = 0  # model turns
    tool_calls: int = 0
    tool_errors: int = 0  # calls that failed, timed out, or could not be parsed
    truncated: bool = False  # a token budget or max_turns ended it, not the model
    finish_reason: str = ""  # of the last model turn: "stop" or "length"

    def add_model_turn(self, ids: list[int], logprobs: list[float]) -> None:
        if len(ids) != len(logprobs):
            raise ValueError(f"{len(ids)} tokens but {len(logprobs)} log-probs")
        self.response_ids += ids
        self.loss_mask += [1] * len(ids)
        self.logprobs += logprobs
        self.turns += 1

    def add_outside_turn(self, ids: list[int]) -> None:
        """Tool results or an environment's observation: context, not trained on."""
        self.response_ids += ids
        self.loss_mask += [0] * len(ids)
        self.logprobs += [0.0] * len(ids)

    @property
    def ids(self) -> list[int]:
        """What the model sees next: the prompt and everything after it."""
        return self.prompt_ids + self.response_ids

    def model_token_count(self) -> int:
        return sum(self.loss_mask)
