"""Prompts that cannot be trained on are refused at load, naming the file and the row:
an empty prompt (it crashed mid-run when sampled), messages without a role (they were
taken as user turns) or with empty content."""

import json

import pytest

from rl.core.data import PromptDataset, read_rows
from rl.core.errors import DataError, UserError
from rl.core.models import build_char_tokenizer

GOOD = {"prompt": [{"role": "user", "content": "1+1="}], "answer": "2"}


def load(tmp_path, bad_row, chat_template="auto"):
    """A jsonl file whose row 2 is `bad_row`, loaded as a run loads it."""
    path = tmp_path / "train.jsonl"
    rows = [GOOD, GOOD, bad_row, GOOD]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    tokenizer = build_char_tokenizer()
    with pytest.raises(DataError) as error:
        PromptDataset(read_rows(str(path)), tokenizer, chat_template=chat_template)
    message = str(error.value)
    assert isinstance(error.value, UserError) and "\n" not in message
    assert message.startswith(f"{path}, row 2: "), message
    return message


@pytest.mark.parametrize("prompt", ["", "   \n"])
def test_an_empty_prompt_string_is_refused(tmp_path, prompt):
    assert "the prompt ('prompt') is empty" in load(tmp_path, {"prompt": prompt, "answer": "1"})


@pytest.mark.parametrize("content", ["", " ", None])
def test_a_message_with_empty_content_is_refused(tmp_path, content):
    row = {
        "prompt": [{"role": "system", "content": "be brief"}, {"role": "user", "content": content}]
    }
    assert "message 2 (user) has empty content" in load(tmp_path, row)


@pytest.mark.parametrize("chat_template", ["auto", "none"])
def test_a_message_without_a_role_is_refused(tmp_path, chat_template):
    row = {"prompt": [{"content": "1+1="}], "answer": "2"}
    message = load(tmp_path, row, chat_template)
    assert "message 1 has no 'role'" in message and "system, user, assistant or tool" in message


def test_good_rows_still_load(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps({"prompt": "2+2=", "answer": "4"}) + "\n")
    dataset = PromptDataset(read_rows(str(path)), build_char_tokenizer())
    assert len(dataset) == 2 and all(item.prompt_ids for item in dataset.items)
