"""RLinf's math data as RLinf reads it (rlinf/data/datasets/reasoning/dataset.py): jsonl
rows with `data.prompt_key` / `data.answer_key` columns; with `apply_chat_template: false`
the prompt text is encoded as it is (`tokenizer.encode`, the tokenizer's special tokens),
with `true` the prompt column's chat messages go through the tokenizer's chat template
(`add_generation_prompt=True`) first; a prompt longer than `max_prompt_length` that was not
filtered keeps its first tokens. The converted config must feed the model the same ids,
on a real-shape Qwen2.5 tokenizer; and the reward is RLinf's math reward, ±reward_scale."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rl.cli.dialects import convert
from rl.core.config import config_from_mapping
from rl.core.data import read_rows
from rl.core.rewards import RewardManager, RewardRequest
from rl.core.trainer.build import build_dataset

MATH = Path(__file__).parent / "rlinf" / "upstream" / "examples" / "reasoning" / "config" / "math"
FSDP = MATH / "qwen2.5-1.5b-grpo-fsdp.yaml"
QUESTIONS = ["What is 1+1?", "Compute $\\frac{3}{4}+\\frac{1}{4}$. " * 3, "Say 7."]


@pytest.fixture(scope="module")
def tokenizer_folder(model_folder):
    """The session's Qwen2.5-0.5B folder (the journeys' own: built once per test worker)."""
    return model_folder("qwen2.5-0.5b", num_layers=2)


@pytest.fixture(scope="module")
def tokenizer(tokenizer_folder):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tokenizer_folder)


def rlinf_ids(row, tokenizer, templated, prompt_key, max_prompt_length):
    """ReasoningDataset: the chat template (if on), tokenizer.encode, the first tokens."""
    prompt = row[prompt_key]
    if templated:
        prompt = tokenizer.apply_chat_template(
            [prompt], add_generation_prompt=True, tokenize=False
        )[0]
    return tokenizer.encode(prompt)[:max_prompt_length]


def rows_file(tmp_path, templated):
    path = tmp_path / "train.jsonl"
    with path.open("w") as out:
        for question, answer in zip(QUESTIONS, ["2", "1", "7"], strict=True):
            prompt = [{"role": "user", "content": question}] if templated else question
            out.write(json.dumps({"prompt": prompt, "solutions": [answer]}) + "\n")
    return path


@pytest.mark.parametrize("templated", [False, True])
def test_the_prompt_ids_are_rlinfs(tmp_path, tokenizer, tokenizer_folder, templated):
    path = rows_file(tmp_path, templated)
    overrides = [
        f"data.train_data_paths=[{path}]",
        f"data.val_data_paths=[{path}]",
        f"data.apply_chat_template={templated}",
        "data.max_prompt_length=24",
        "data.filter_prompt_by_length=false",
        "runner.seq_length=64",
        f"actor.model.model_path={tokenizer_folder}",
        f"rollout.model.model_path={tokenizer_folder}",
    ]
    conversion = convert("rlinf", FSDP, overrides)
    config = config_from_mapping(conversion.config, "converted")
    assert (config.data.prompt_key, config.data.answer_key) == ("prompt", "solutions")
    dataset = build_dataset(config, config.data.train_files, 0, 0, tokenizer)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(dataset) == len(rows)
    for item, row in zip(dataset.items, rows, strict=True):
        assert item.prompt_ids == rlinf_ids(row, tokenizer, templated, "prompt", 24)
        assert item.ground_truth == row["solutions"]
    # the long prompt was cut to its first 24 tokens, as RLinf cuts it
    assert len(dataset.items[1].prompt_ids) == 24


def test_filtered_prompts_are_dropped_as_rlinf_drops_them(tmp_path, tokenizer, tokenizer_folder):
    path = rows_file(tmp_path, False)
    conversion = convert(
        "rlinf",
        FSDP,
        [f"data.train_data_paths=[{path}]", "data.max_prompt_length=24", "runner.seq_length=64"],
    )
    config = config_from_mapping(conversion.config, "converted")
    dataset = build_dataset(config, config.data.train_files, 0, 0, tokenizer)
    kept = [r for r in read_rows([str(path)]) if len(tokenizer.encode(r.data["prompt"])) <= 24]
    assert len(dataset) == len(kept) == 2


def test_the_reward_is_rlinfs_math_reward_times_its_scale(tmp_path):
    conversion = convert("rlinf", FSDP)
    config = config_from_mapping(conversion.config, "converted")
    function = config.reward.custom_reward_function
    assert function.path == "pkg://rl.core.rewards.rlinf_math"
    assert config.reward.reward_scale == 5.0
    manager = RewardManager(function.path, function.name, reward_scale=5.0)
    requests = [
        RewardRequest("unknown", "so \\boxed{50\\%}", ["0.5"]),
        RewardRequest("unknown", "so \\boxed{3}", ["0.5", "3"]),
        RewardRequest("unknown", "no answer", ["0.5"]),
    ]
    assert manager.score(requests).scores == [5.0, 5.0, -5.0]
