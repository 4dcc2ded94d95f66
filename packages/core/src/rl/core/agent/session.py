"""One agent session behind the OpenAI-compatible endpoint, recorded token in / token out.

An agent program holds the conversation as messages; the policy sees tokens. The session
keeps both in step, so that training sees exactly what was generated:

- The first chat request is rendered by the chat template (its `tools` described to it):
  that is the trajectory's prompt.
- Each answer is the engine's tokens, recorded as they were sampled (log-probs, loss mask
  1). The agent is sent their text, with Hermes-style `<tool_call>` blocks read into
  OpenAI `tool_calls` (their text left out of `content`).
- A later request whose messages are the recorded ones plus new tool or user messages
  adds only the new messages' tokens (`ChatDelta`: the template's tool or user turn,
  loss mask 0) after the recorded tokens: the model's text is never tokenized again.
  An answer the engine cut by its length gets the end-of-turn token the template would
  have closed it with (an outside token) before the next turn.

The rule when the agent's messages are not an extension of the recording (it edited,
trimmed or summarised its history, changed its tools, or sent an assistant message of its
own): the request is answered from its messages rendered afresh, and the recording stops
there. The sample trains on what was recorded up to that request, its reward is the
agent's final outcome, and the session counts the edit (`agent/history_edits`).
Sampling within a session is the run's: requests asking for other values are answered
with the run's and counted (`agent/sampling_overridden`), since the trainer's log-probs
assume them.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rl.core.agent.chat import ChatDelta
from rl.core.agent.parser import HermesParser
from rl.core.agent.trajectory import Trajectory


class BudgetSpent(ValueError):
    """The session's tokens are spent (`max_total_tokens` after the prompt)."""


@dataclass
class SessionStats:
    requests: int = 0
    history_edits: int = 0  # requests that did not extend the recording
    unrecorded_turns: int = 0  # answers given after the recording stopped
    sampling_overridden: int = 0  # requests whose sampling differed from the run's
    generated: int = 0  # the model's tokens over all answers, recorded or not
    over_budget: bool = False  # a request came after the session's tokens or turns


@dataclass
class Turn:
    """What one chat request is answered from: the prompt's token ids, and whether the
    answer extends the recording."""

    prompt_ids: list[int]
    recorded: bool
    budget: int  # tokens the answer may have


@dataclass
class AgentSession:
    tokenizer: Any
    max_total_tokens: int  # after the prompt: model, tool and user tokens together
    max_tokens_per_turn: int
    max_turns: int  # answers a session gets (verl's max_assistant_turns)
    parser: HermesParser = field(default_factory=HermesParser)
    trajectory: Trajectory | None = None
    stats: SessionStats = field(default_factory=SessionStats)
    _chat: ChatDelta | None = None
    _tools: list[Any] | None = None
    _messages: list[Any] = field(default_factory=list)  # the recording, normalised
    _recording: bool = True
    _cut: bool = False  # the last recorded answer ended by length
    _text: bool = False  # a text-completion session (token ids in), not a chat one

    def turn(self, messages: Sequence[dict[str, Any]], tools: Any = None) -> Turn:
        """The prompt of a chat request, the recording extended where it may be."""
        self._count_request()
        normal = [normalise(m) for m in messages]
        tools = list(tools) if tools else None
        if self.trajectory is None:
            self._chat, self._tools = ChatDelta(self.tokenizer, tools), tools
            self.trajectory = Trajectory(self._chat.prompt_ids(list(messages)))
            self._messages = normal
            return Turn(self.trajectory.ids, True, self._budget())
        if self._recording and not self._text and self._extends(normal, tools):
            assert self._chat is not None
            new = list(messages)[len(self._messages) :]
            outside = [self.tokenizer.eos_token_id] if self._cut else []
            turn = self._extended(outside + self._chat.turn_ids(new))
            self._messages = normal
            return turn
        return self._unrecorded(ChatDelta(self.tokenizer, tools).prompt_ids(list(messages)))

    def turn_tokens(self, prompt_ids: list[int]) -> Turn:
        """The prompt of a text completion request (token ids): it extends the recording
        when it starts with every recorded token; what follows them is the agent's own
        (an outside turn). A session is chat or text throughout: a text request in a chat
        session, or one that drops or changes recorded tokens, is an edit."""
        self._count_request()
        if self.trajectory is None:
            self._text = True
            self.trajectory = Trajectory(list(prompt_ids))
            return Turn(self.trajectory.ids, True, self._budget())
        done = self.trajectory.ids
        if self._recording and self._text and prompt_ids[: len(done)] == done:
            return self._extended(list(prompt_ids[len(done) :]))
        return self._unrecorded(list(prompt_ids))

    def answer_text(
        self, turn: Turn, ids: list[int], logprobs: list[float], finish_reason: str
    ) -> str:
        """A text completion's answer (recorded if the turn is)."""
        self.stats.generated += len(ids)
        if turn.recorded:
            assert self.trajectory is not None
            self.trajectory.add_model_turn(list(ids), list(logprobs))
            self.trajectory.finish_reason = finish_reason
        return str(self.tokenizer.decode(ids, skip_special_tokens=True))

    def _extended(self, outside: list[int]) -> Turn:
        """The recording with the agent's `outside` tokens added, if the budget holds them."""
        assert self.trajectory is not None
        if len(self.trajectory.response_ids) + len(outside) >= self.max_total_tokens:
            self.stats.over_budget = True
            raise BudgetSpent(self._spent())
        self.trajectory.add_outside_turn(outside)
        return Turn(self.trajectory.ids, True, self._budget())

    def _count_request(self) -> None:
        self.stats.requests += 1
        if self.stats.requests > self.max_turns:
            self.stats.over_budget = True
            raise BudgetSpent(
                f"this session has had its {self.max_turns} answers "
                "(rollout.multi_turn.max_assistant_turns)"
            )

    def _unrecorded(self, prompt_ids: list[int]) -> Turn:
        """A request answered but not recorded: the recording stops at the first."""
        if self._recording:
            self.stats.history_edits += 1
            self._recording = False
        self.stats.unrecorded_turns += 1
        if self.stats.generated >= self.max_total_tokens:
            self.stats.over_budget = True
            raise BudgetSpent(self._spent())
        left = self.max_total_tokens - self.stats.generated
        return Turn(prompt_ids, False, min(self.max_tokens_per_turn, left))

    def _extends(self, normal: list[Any], tools: list[Any] | None) -> bool:
        done = len(self._messages)
        if tools != self._tools or normal[:done] != self._messages or len(normal) <= done:
            return False
        return all(message["role"] in ("tool", "user", "system") for message in normal[done:])

    def _budget(self) -> int:
        assert self.trajectory is not None
        left = self.max_total_tokens - len(self.trajectory.response_ids)
        if left <= 0:
            self.stats.over_budget = True
            raise BudgetSpent(self._spent())
        return min(self.max_tokens_per_turn, left)

    def _spent(self) -> str:
        return (
            f"this session's {self.max_total_tokens} tokens after the prompt are spent "
            "(rollout.multi_turn.max_total_tokens)"
        )

    def answer(
        self, turn: Turn, ids: list[int], logprobs: list[float], finish_reason: str
    ) -> dict[str, Any]:
        """The assistant message for the engine's answer to `turn` (recorded if the turn
        is): its text, with the tool calls it wrote as OpenAI `tool_calls`."""
        self.stats.generated += len(ids)
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        message = assistant_message(text, self.parser)
        if turn.recorded:
            assert self.trajectory is not None
            self.trajectory.add_model_turn(list(ids), list(logprobs))
            self.trajectory.finish_reason = finish_reason
            self.trajectory.tool_calls += len(message["tool_calls"])
            self._cut = finish_reason == "length"
            self._messages.append(normalise(message))
        return message


def assistant_message(text: str, parser: HermesParser) -> dict[str, Any]:
    """OpenAI's assistant message for the model's `text`: Hermes tool-call blocks read into
    `tool_calls`, the rest of the text its `content`."""
    calls = parser.parse(text).calls
    if not calls:
        return {"role": "assistant", "content": text, "tool_calls": []}
    pattern = re.escape(parser.open_tag) + r".*?(?:" + re.escape(parser.close_tag) + r"|$)"
    content = re.sub(pattern, "", text, flags=re.DOTALL).strip()
    tool_calls = [
        {
            "id": f"call_{index}",
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
        }
        for index, call in enumerate(calls)
    ]
    return {"role": "assistant", "content": content, "tool_calls": tool_calls}


def normalise(message: Mapping[str, Any]) -> dict[str, Any]:
    """What must be equal for two messages to be the same turn: role, text, and for an
    assistant its calls (name and parsed arguments) and for a tool its call id; the extra
    fields clients echo back (`refusal`, `audio`, `annotations`, None or empty) are not."""
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    found: dict[str, Any] = {"role": message.get("role"), "content": content or ""}
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        arguments = function.get("arguments")
        with contextlib.suppress(json.JSONDecodeError):  # compared as the text it is
            arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
        calls.append((function.get("name"), json.dumps(arguments, sort_keys=True)))
    if calls:
        found["tool_calls"] = calls
    if message.get("role") == "tool" and message.get("tool_call_id"):
        found["tool_call_id"] = message["tool_call_id"]
    return found
