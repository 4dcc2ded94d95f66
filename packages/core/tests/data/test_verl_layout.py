"""verl's data layout read natively, with real-size tokenizers and their chat templates:
the prompt messages go through the chat template exactly as verl applies them (the token ids
equal `apply_chat_template(..., add_generation_prompt=True, tokenize=True)`, no second
BOS), `data.apply_chat_template_kwargs` reaches the template, the ground truth comes from
`reward_model.ground_truth` and a custom reward function gets the row's `extra_info`."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from rl.core.data import PromptDataset, read_rows
from rl.core.data.verl_layout import (
    GSM8K_SOURCE,
    dapo_row,
    gsm8k_rows,
    math_row,
    write_parquet,
)
from rl.core.errors import DataError
from rl.core.models import build_tokenizer
from rl.core.rewards import default_compute_score


@pytest.fixture(scope="module", params=["qwen2.5", "qwen3", "llama-3.2"])
def tokenizer(request):
    return build_tokenizer(request.param)


@pytest.fixture(scope="module")
def verl_parquet(tmp_path_factory):
    """GSM8K and MATH rows as verl's preprocessing writes them, and a DAPO-math file."""
    folder = tmp_path_factory.mktemp("verl_data")
    rows = [*gsm8k_rows(6, "train"), math_row("What is $1+1$?", "2", "train", 6)]
    return [
        str(write_parquet(rows, folder / "train.parquet")),
        str(write_parquet([dapo_row("What is 6*7?", "42", 7)], folder / "dapo.parquet")),
    ]


def test_the_file_holds_verls_columns_as_structs(verl_parquet):
    schema = pq.read_schema(verl_parquet[0])
    assert set(schema.names) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}
    assert str(schema.field("reward_model").type).startswith("struct<")


def test_token_ids_equal_transformers_chat_template(tokenizer, verl_parquet):
    rows = read_rows(verl_parquet)
    data = PromptDataset(rows, tokenizer, max_prompt_length=4096)
    for row, item in zip(rows, data.items, strict=True):
        messages = row.data["prompt"]
        expected = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True, return_dict=False
        )
        assert item.prompt_ids == list(expected)
        assert item.prompt_text == tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False
        )
        if tokenizer.bos_token_id is not None:  # Llama: the template writes the one BOS
            assert item.prompt_ids.count(tokenizer.bos_token_id) == 1


def test_ground_truth_data_source_and_extra_info_as_verl_hands_them(verl_parquet, tokenizer):
    rows = read_rows(verl_parquet)
    data = PromptDataset(rows, tokenizer, max_prompt_length=4096)  # answer_key left default
    first = data.items[0]
    assert first.data_source == GSM8K_SOURCE
    assert first.ground_truth == rows[0].data["reward_model"]["ground_truth"]
    assert first.extra_info == rows[0].data["extra_info"]  # index, split, answer, question
    assert first.extra_info["index"] == 0 and first.extra_info["split"] == "train"
    solution = f"so the answer is\n#### {first.ground_truth}"
    assert default_compute_score(first.data_source, solution, first.ground_truth) == 1.0
    dapo = data.items[-1]
    assert dapo.data_source == "math_dapo" and dapo.ground_truth == "42"


def test_apply_chat_template_kwargs_reach_the_template():
    tokenizer = build_tokenizer("qwen3")
    row = gsm8k_rows(1, "test")[0]
    thinking = PromptDataset([row], tokenizer, max_prompt_length=4096)
    plain = PromptDataset(
        [row],
        tokenizer,
        max_prompt_length=4096,
        apply_chat_template_kwargs={"enable_thinking": False},
    )
    expected = tokenizer.apply_chat_template(
        row["prompt"], add_generation_prompt=True, tokenize=False, enable_thinking=False
    )
    assert plain[0].prompt_text == expected and "<think>\n\n</think>" in expected
    assert thinking[0].prompt_text != plain[0].prompt_text


def test_messages_without_a_chat_template_are_refused_with_the_fix():
    tokenizer = build_tokenizer("qwen2.5")
    tokenizer.chat_template = None
    with pytest.raises(DataError, match=r"no chat template .* data.chat_template: none"):
        PromptDataset(gsm8k_rows(1, "train"), tokenizer, max_prompt_length=4096)
    joined = PromptDataset(
        gsm8k_rows(1, "train"), tokenizer, chat_template="none", max_prompt_length=4096
    )
    assert joined[0].prompt_text.startswith(gsm8k_rows(1, "train")[0]["prompt"][0]["content"])
