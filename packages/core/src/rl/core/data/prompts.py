"""Rows -> tokenized prompts: prompt column or chat messages, chat template, length limits."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rl.core.data.reader import SourcedRow
from rl.core.errors import DataError


@dataclass(frozen=True)
class PromptItem:
    """One prompt ready for rollout; `index` is its position in the dataset."""

    index: int
    prompt_ids: list[int]
    prompt_text: str
    ground_truth: Any
    data_source: str
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PromptOptions:
    prompt_key: str = "prompt"
    answer_key: str = "answer"
    data_source_key: str = "data_source"
    chat_template: str = "none"  # "native": the tokenizer's apply_chat_template
    max_prompt_length: int = 1024
    truncation: str = "error"  # error | left | right
    tools: tuple[dict[str, Any], ...] = ()  # agentic runs: described to the chat template


def lookup(data: dict[str, Any], dotted: str) -> Any:
    """`data["a"]["b"]` for "a.b"; KeyError when any part is missing."""
    value: Any = data
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(dotted)
        value = value[part]
    return value


def _messages(row: SourcedRow, options: PromptOptions) -> list[dict[str, str]] | str:
    data = row.data
    if options.prompt_key in data:
        value = data[options.prompt_key]
    elif "messages" in data:
        value = data["messages"]
    else:
        raise DataError(
            f"{row.source}, row {row.index}: no prompt column {options.prompt_key!r} (nor "
            f"'messages'); columns are {sorted(data)}. Set data.prompt_key to the right column."
        )
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and all(isinstance(m, dict) and "content" in m for m in value):
        return [{"role": str(m.get("role", "user")), "content": str(m["content"])} for m in value]
    raise DataError(
        f"{row.source}, row {row.index}: the prompt must be a string or a list "
        f"of {{role, content}} messages, got {type(value).__name__}"
    )


def prompt_text(row: SourcedRow, options: PromptOptions, tokenizer: Any) -> str:
    prompt = _messages(row, options)
    if options.chat_template == "native":
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        return str(
            tokenizer.apply_chat_template(
                messages,
                tools=list(options.tools) or None,
                add_generation_prompt=True,
                tokenize=False,
            )
        )
    return prompt if isinstance(prompt, str) else "\n".join(m["content"] for m in prompt)


def tokenize_prompt(
    row: SourcedRow, options: PromptOptions, tokenizer: Any
) -> tuple[str, list[int]]:
    """(text, ids) of the row's prompt, truncated as `truncation` says."""
    text = prompt_text(row, options, tokenizer)
    # The chat template already wrote any special tokens into the text.
    ids = tokenizer(text, add_special_tokens=options.chat_template != "native").input_ids
    limit = options.max_prompt_length
    if len(ids) > limit:
        if options.truncation == "error":
            raise DataError(
                f"{row.source}, row {row.index}: the prompt has {len(ids)} tokens, more than "
                f"data.max_prompt_length = {limit}. Raise the limit, set data.truncation to "
                "left or right, or set data.filter_overlong_prompts: true"
            )
        ids = ids[-limit:] if options.truncation == "left" else ids[:limit]
    return text, ids


def answer_of(row: SourcedRow, options: PromptOptions) -> Any:
    """The row's ground truth, or None when the answer column is missing (the reward decides
    whether that is an error: see `rl.core.rewards.inputs`)."""
    try:
        return lookup(row.data, options.answer_key)
    except KeyError:
        return None


def data_source_of(row: SourcedRow, options: PromptOptions) -> str:
    return str(row.data.get(options.data_source_key, "unknown"))


def make_item(index: int, row: SourcedRow, options: PromptOptions, tokenizer: Any) -> PromptItem:
    text, ids = tokenize_prompt(row, options, tokenizer)
    skip = {options.prompt_key, "messages", options.data_source_key}
    return PromptItem(
        index=index,
        prompt_ids=ids,
        prompt_text=text,
        ground_truth=answer_of(row, options),
        data_source=data_source_of(row, options),
        extra={k: v for k, v in row.data.items() if k not in skip},
    )
