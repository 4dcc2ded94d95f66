"""The tokens of a tool (or environment) turn, through the model's own chat template: the
template renders the conversation with and without the new messages, and the new turn is
the difference after the assistant's end-of-turn token (which the model sampled itself
and which is therefore already in the trajectory). Only these outside tokens are
tokenised; the model's tokens are never re-tokenised."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_USER = {"role": "user", "content": "x"}
_ASSISTANT = {"role": "assistant", "content": "y"}


class ChatDelta:
    def __init__(self, tokenizer: Any, tools: Sequence[dict[str, Any]] | None = None) -> None:
        self.tokenizer, self.tools = tokenizer, list(tools or []) or None

    def _render(self, messages: list[dict[str, Any]], generation_prompt: bool) -> list[int]:
        ids = self.tokenizer.apply_chat_template(
            messages, tools=self.tools, add_generation_prompt=generation_prompt, tokenize=True
        )
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # BatchEncoding
            ids = ids["input_ids"]
        return list(ids)

    def prompt_ids(self, messages: Sequence[dict[str, Any]]) -> list[int]:
        """`messages` rendered as a prompt (the assistant's turn opened)."""
        return self._render(list(messages), generation_prompt=True)

    def turn_ids(self, messages: Sequence[dict[str, Any]]) -> list[int]:
        """The tokens that follow an assistant turn (ending in its EOS) when `messages`
        (tool or user messages) are added and the assistant is prompted again."""
        base = self._render([_USER, _ASSISTANT], generation_prompt=False)
        full = self._render([_USER, _ASSISTANT, *messages], generation_prompt=True)
        cut = _after_assistant_turn(base, self.tokenizer.eos_token_id)
        if full[:cut] != base[:cut]:
            raise ValueError(
                "the chat template renders the conversation differently once messages are "
                "added; its tool turns cannot be appended token by token"
            )
        return full[cut:]


def _after_assistant_turn(base: list[int], eos: int | None) -> int:
    """Where the assistant's turn ends in `base`: after its last EOS (a template may add
    a newline after it, which belongs to the next turn), else at the end."""
    if eos is not None and eos in base:
        return len(base) - base[::-1].index(eos)
    return len(base)
