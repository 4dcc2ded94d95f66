"""A multi-turn demonstration as SFT tokens: the conversation that follows a prompt
(`demonstration` column: a list of {role, content} messages, the model's turns as
`assistant`, tool or environment turns as `tool` / `user`) laid out exactly as the agent
loop lays out a trajectory: each assistant turn is its text's tokens and EOS (learned,
mask 1), each run of other messages is the chat template's turn between two assistant
turns (read, mask 0). What SFT learns is therefore what RL later samples, token for token.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rl.core.agent.chat import ChatDelta
from rl.core.errors import DataError

COLUMN = "demonstration"


def demonstration_tokens(messages: Any, tokenizer: Any, where: str) -> tuple[list[int], list[int]]:
    """(response ids, loss mask) of one demonstration; `where` names the row in errors."""
    turns = _checked(messages, where)
    chat = ChatDelta(tokenizer)
    ids: list[int] = []
    mask: list[int] = []
    outside: list[dict[str, str]] = []
    for message in turns:
        if message["role"] != "assistant":
            outside.append(message)
            continue
        if outside:
            read = chat.turn_ids(outside)
            ids += read
            mask += [0] * len(read)
            outside = []
        said = [*tokenizer(message["content"], add_special_tokens=False).input_ids]
        said.append(tokenizer.eos_token_id)
        ids += said
        mask += [1] * len(said)
    return ids, mask


def _checked(messages: Any, where: str) -> list[dict[str, str]]:
    if not isinstance(messages, Sequence) or isinstance(messages, str) or not messages:
        raise DataError(
            f"{where}: the {COLUMN!r} column must be a non-empty list of {{role, content}} "
            f"messages, got {type(messages).__name__}"
        )
    turns = []
    for number, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            raise DataError(f"{where}: {COLUMN}[{number}] needs a text 'content'")
        role = message.get("role")
        if role not in ("assistant", "tool", "user"):
            raise DataError(
                f"{where}: {COLUMN}[{number}] has role {role!r}; use assistant, tool or user"
            )
        turns.append({"role": str(role), "content": message["content"]})
    if turns[0]["role"] != "assistant" or turns[-1]["role"] != "assistant":
        raise DataError(
            f"{where}: the {COLUMN!r} must start with an assistant turn (the prompt opened "
            "it) and end with one"
        )
    return turns
