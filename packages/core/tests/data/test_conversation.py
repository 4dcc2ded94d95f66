"""Whole conversations as SFT rows (`data.messages_key`): the prompt is everything before the
first assistant turn, the demonstration the rest; rows that cannot be split, or that carry
per-row template inputs rl does not render, are refused naming the file and row."""

from __future__ import annotations

import pytest

from rl.core.data import SourcedRow
from rl.core.data.conversation import split_conversation
from rl.core.errors import DataError

SYSTEM = {"role": "system", "content": "be brief"}
USER = {"role": "user", "content": "2+2?"}
ANSWER = {"role": "assistant", "content": "4"}
MORE = {"role": "user", "content": "and 3+3?"}


def test_the_prompt_ends_before_the_first_assistant_turn():
    row = SourcedRow("t.parquet", 3, {"messages": [SYSTEM, USER, ANSWER, MORE, ANSWER], "x": 1})
    split = split_conversation(row, "messages", "prompt")
    assert split.data["prompt"] == [SYSTEM, USER]
    assert split.data["demonstration"] == [ANSWER, MORE, ANSWER]
    assert split.data["x"] == 1 and (split.source, split.index) == ("t.parquet", 3)


@pytest.mark.parametrize(
    ("messages", "needle"),
    [
        ([SYSTEM, USER], "no assistant turn"),
        ([ANSWER, USER], "no message before the first assistant turn"),
    ],
)
def test_a_conversation_without_a_prompt_and_an_answer_is_refused(messages, needle):
    with pytest.raises(DataError, match=f"t.parquet, row 0: .*{needle}"):
        split_conversation(SourcedRow("t.parquet", 0, {"messages": messages}), "messages", "p")


def test_per_row_tools_or_thinking_flags_are_refused_not_dropped():
    row = {"messages": [USER, ANSWER], "tools": [{"name": "calc"}]}
    with pytest.raises(DataError, match="row 5: the row's 'tools' column"):
        split_conversation(SourcedRow("t.parquet", 5, row), "messages", "prompt")
    row = {"messages": [USER, ANSWER], "enable_thinking": True}
    with pytest.raises(DataError, match="'enable_thinking' column"):
        split_conversation(SourcedRow("t.parquet", 5, row), "messages", "prompt")
    with pytest.raises(DataError, match="no 'conv' column"):
        split_conversation(SourcedRow("t.parquet", 5, row), "conv", "prompt")
