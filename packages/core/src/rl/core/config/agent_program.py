"""`rollout.multi_turn.agent`: an agent program trained through the OpenAI-compatible
endpoint (`rl.core.agent.program`), instead of rl's own agent loop. One of `command` (any
program: the task row as JSON on stdin, the endpoint as OPENAI_BASE_URL) or `function`
(`path/to/file.py:name` or `package.module:name`, called as `fn(task, base_url,
api_key)`); the session's budgets are `rollout.multi_turn`'s (`max_assistant_turns`,
`max_tokens_per_turn`, `max_total_tokens`)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Literal

from rl.core.config.rules import (
    NOT_EMPTY,
    POSITIVE,
    POSITIVE_INT,
    Checked,
    check_fields,
    optional,
    require,
    setting,
)


@dataclass(frozen=True)
class AgentProgramConfig(Checked):
    # a command line (split as a shell splits it) or its words
    command: str | tuple[str, ...] | None = None
    function: str | None = setting(None, optional(NOT_EMPTY))
    # where a command runs: auto, the strongest OS boundary here (bwrap, then unshare; no
    # network but the endpoint); none runs it as the trainer's user, with its network
    sandbox: Literal["auto", "bwrap", "unshare", "none"] = "auto"
    timeout_s: float = setting(600.0, POSITIVE)  # a session's wall-clock limit
    concurrency: int = setting(64, POSITIVE_INT)  # sessions at a time

    def __post_init__(self) -> None:
        check_fields(self)
        require(
            self.command is None or self.function is None,
            "function",
            self.function,
            "null when agent.command is set (one program a run)",
        )
        require(bool(self.words) or self.command is None, "command", self.command, "a command")

    @property
    def enabled(self) -> bool:
        return self.command is not None or self.function is not None

    @property
    def words(self) -> list[str]:
        if self.command is None:
            return []
        return shlex.split(self.command) if isinstance(self.command, str) else list(self.command)
