"""Whole conversations as SFT rows (`data.messages_key`, verl's multi-turn SFT data): a row's
messages up to its first assistant turn are the prompt, the rest the demonstration
(`rl.core.trainer.demonstration`: assistant turns learned, the others read)."""

from __future__ import annotations

from typing import Any

from rl.core.data.reader import SourcedRow
from rl.core.errors import DataError

DEMONSTRATION = "demonstration"  # the column rl.core.trainer.demonstration reads
PER_ROW = ("tools", "enable_thinking")  # verl's tools_key / enable_thinking_key columns


def split_conversation(row: SourcedRow, messages_key: str, prompt_key: str) -> SourcedRow:
    """`row` with `prompt_key` = the messages before the first assistant turn and
    `demonstration` = the rest; DataError naming the file and row without one."""
    where = f"{row.source}, row {row.index}"
    messages: Any = row.data.get(messages_key)
    if messages is None:
        raise DataError(
            f"{where}: no {messages_key!r} column (data.messages_key); columns are "
            f"{sorted(row.data)}"
        )
    for column in PER_ROW:
        if row.data.get(column) not in (None, [], {}, ""):
            raise DataError(
                f"{where}: the row's {column!r} column would go to the chat template (verl's "
                f"data.{column}_key); rl renders conversations without per-row {column}: drop "
                "the column, or set it for all rows (rollout.multi_turn.tools, "
                "data.apply_chat_template_kwargs)"
            )
    turns = list(messages)
    first = next(
        (i for i, m in enumerate(turns) if isinstance(m, dict) and m.get("role") == "assistant"),
        None,
    )
    if first is None or first == 0:
        what = (
            "no assistant turn" if first is None else "no message before the first assistant turn"
        )
        raise DataError(
            f"{where}: the conversation in {messages_key!r} has {what}; SFT needs a prompt "
            "(system/user messages) and at least one assistant turn to learn"
        )
    data = {**row.data, prompt_key: turns[:first], DEMONSTRATION: turns[first:]}
    return SourcedRow(row.source, row.index, data)
