"""ROLL's RLVR data as ROLL feeds it: rows with `messages` stored as a JSON string,
`ground_truth` and `tag` (written by `rl.core.data.roll_layout`), rendered with the chat
template a converted ROLL config names. The oracle is ROLL's encode function
(roll/pipeline/rlvr/rlvr_pipeline.py, roll/datasets/chat_template.py at 8eb27cc2)
restated: `json.loads` the string, `apply_chat_template(..., tokenize=False,
add_generation_prompt=True)` (qwen3: `enable_thinking=True`; chatml: its own Jinja), then
`tokenizer(text)`. Real-shape Qwen2.5 and Qwen3 tokenizers (`rl.core.models`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from rl.cli.dialects import convert
from rl.core.config import config_from_mapping
from rl.core.data import read_rows
from rl.core.data.prompts import PromptOptions, make_item
from rl.core.data.roll_layout import messages_of, roll_row, write_jsonl
from rl.core.models.tokenizer_files import tokenizer_folder

# ROLL's chatml template string (roll/datasets/chat_template.py), the oracle for ours
ROLL_CHATML = (
    "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}"
    "{% endif %}{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}"
)
QUESTIONS = [
    ("What is 17 * 23?", "391", "deepmath_103k", None),
    ("Find x if 2x + 3 = 11.", "4", "aime", "Please reason step by step."),
    ("Compute \\frac{1}{2} + \\frac{1}{3}. 答案?", "\\frac{5}{6}", "math_rule", None),
]


def _roll_ids(tokenizer, messages: str, template: str) -> list[int]:
    parsed = json.loads(messages)
    kwargs = {"tokenize": False, "add_generation_prompt": True}
    if template == "qwen3":
        kwargs["enable_thinking"] = True
    if template == "chatml":
        kwargs["chat_template"] = ROLL_CHATML
    text = tokenizer.apply_chat_template(parsed, None, None, **kwargs)
    return tokenizer(text)["input_ids"]


def _converted(tmp_path: Path, template: str, data: Path):
    config = tmp_path / "rlvr_config.yaml"
    config.write_text(
        "pretrain: /models/q\nrollout_batch_size: 4\nnum_return_sequences_in_group: 2\n"
        "prompt_length: 256\nresponse_length: 16\nadv_estimator: reinforce\n"
        "actor_train:\n  training_args: {per_device_train_batch_size: 2}\n"
        f"  data_args: {{template: {template}, file_name: [{data}], messages: messages}}\n"
        "actor_infer:\n  strategy_args: {strategy_name: hf_infer}\n"
    )
    conversion = convert("roll", config)
    return config_from_mapping(conversion.config, "converted")


@pytest.mark.parametrize(
    ("family", "template"),
    [("qwen2.5", "qwen2_5"), ("qwen2.5", "chatml"), ("qwen3", "qwen3"), ("qwen3", "native")],
)
def test_token_ids_equal_what_roll_feeds(tmp_path, family, template):
    data = write_jsonl(
        [roll_row(q, a, tag, i, system) for i, (q, a, tag, system) in enumerate(QUESTIONS)],
        tmp_path / "data" / "train.jsonl",
    )
    raw = [json.loads(line) for line in data.read_text().splitlines()]
    assert all(isinstance(row["messages"], str) for row in raw)  # ROLL's layout: a string
    config = _converted(tmp_path, template, data)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder(family))
    if config.model.custom_chat_template is not None:  # as rl's model loading does
        tokenizer.chat_template = config.model.custom_chat_template
    options = PromptOptions(
        prompt_key=config.data.prompt_key,
        answer_key=config.data.answer_key,
        data_source_key=config.data.data_source_key,
        chat_template=config.data.chat_template,
        max_prompt_length=config.data.max_prompt_length,
        template_kwargs=tuple(config.data.apply_chat_template_kwargs.items()),
    )
    oracle = AutoTokenizer.from_pretrained(tokenizer_folder(family))
    for row, source in zip(read_rows([str(data)]), raw, strict=True):
        item = make_item(row.index, row, options, tokenizer)
        assert item.prompt_ids == _roll_ids(oracle, source["messages"], template)
        assert item.ground_truth == source["ground_truth"]
        assert item.data_source == source["tag"]  # rl scores by data source: ROLL's tag
        assert not item.prompt_text.lstrip().startswith("[{")  # never the raw JSON


def test_only_a_json_list_of_messages_is_parsed():
    messages = json.dumps([{"role": "user", "content": "hi"}])
    assert messages_of(messages) == [{"role": "user", "content": "hi"}]
    for text in ("[1, 2]", "[not json", "plain text", '[{"text": "no role"}]', "[]"):
        assert messages_of(text) == text
