"""ChatLearn's data and reward as the chatlearn dialect runs them: its JSON Lines `.json`
files (`prompt` chat messages, `data_source`, `reward_model.ground_truth`, as its
data_preprocess/math_lighteval.py writes them) become the token ids ChatLearn's
PromptPipeline feeds (chat template with `add_generation_prompt` and `enable_thinking`, then
`tokenizer.encode`; a text prompt encoded as it is), on a real-shape Qwen3 tokenizer; and
each response scores as ChatLearn's own rule reward (pai-chatlearn 1.2.0's
rule_reward_score/math.py, the oracle) scores it."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from rl.cli.dialects import convert
from rl.core.config import config_from_mapping
from rl.core.data.dataset import PromptDataset
from rl.core.data.reader import read_rows
from rl.core.rewards import chatlearn_rule, default_compute_score

ROOT = Path(__file__).resolve().parents[4]
ORACLE = ROOT / ".upstream" / "pai-chatlearn-1.2.0" / "chatlearn" / "utils" / "rule_reward_score"
FSDP = Path(__file__).parent / "chatlearn" / "upstream" / "template" / "grpo_fsdp.yaml"
INSTRUCTION = "Let's think step by step and output the final answer within \\boxed{}."


def chatlearn_math():
    """ChatLearn's own MATH rule (the released file, loaded by path)."""
    path = ORACLE / "math.py"
    if not path.is_file():
        pytest.fail(f"{path} is missing: run scripts/fetch-upstream.sh (install-dev.sh does)")
    spec = importlib.util.spec_from_file_location("chatlearn_math_oracle", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.compute_score


RESPONSES = [
    ("so the answer is \\boxed{18}.", "18"),
    ("#### 18", "18"),
    ("\\boxed{\\dfrac12}", "\\frac{1}{2}"),
    ("\\boxed{0.5}", "\\frac{1}{2}"),
    ("\\boxed{2/4}", "\\frac{1}{2}"),
    ("first \\boxed{3} then \\boxed{4}", "4"),
    ("\\boxed 7$ done", "7"),
    ("\\fbox{7}", "7"),
    ("\\boxed{10\\text{ cm}}", "10"),
    ("\\boxed{x = 5}", "5"),
    ("\\boxed{5", "5"),
    ("Answer: 42", "42"),
    ("\\boxed{42}", "42"),
    ("no box at all", "1"),
]


@pytest.mark.parametrize(
    "data_source", ["openai/gsm8k", "DigitalLearningGmbH/MATH-lighteval", "aime24", "aime25"]
)
@pytest.mark.parametrize(("response", "truth"), RESPONSES)
def test_scores_equal_chatlearns_own_rule(data_source, response, truth):
    oracle = chatlearn_math()
    assert chatlearn_rule.compute_score(data_source, response, truth) == oracle(response, truth)


def test_the_same_data_source_scores_differently_under_verls_rules():
    """verl reads `openai/gsm8k` by its `#### N` line; ChatLearn by the last box."""
    assert default_compute_score("openai/gsm8k", "#### 18", "18") == 1.0
    assert chatlearn_rule.compute_score("openai/gsm8k", "#### 18", "18") == 0.0
    assert chatlearn_rule.compute_score("openai/gsm8k", "\\boxed{18}", "18") == 1.0


def test_other_data_sources_are_refused_by_name():
    with pytest.raises(Exception, match="geo3k rule"):
        chatlearn_rule.compute_score("hiyouga/geometry3k", "\\boxed{1}", "1")
    with pytest.raises(Exception, match="scores only openai/gsm8k"):
        chatlearn_rule.compute_score("math_dapo", "\\boxed{1}", "1")


def math_rows(count: int) -> list[dict]:
    """Rows as ChatLearn's data_preprocess/math_lighteval.py writes them."""
    return [
        {
            "data_source": "DigitalLearningGmbH/MATH-lighteval",
            "prompt": [{"role": "user", "content": f"What is {i} + {i}? {INSTRUCTION}"}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": str(2 * i)},
            "extra_info": {"split": "train", "index": i},
        }
        for i in range(count)
    ]


def write_json_lines(rows, path: Path) -> Path:
    """ChatLearn's `.json`: one JSON object a line (datasets' to_json)."""
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def chatlearn_ids(tokenizer, prompt, enable_thinking):
    """What ChatLearn's PromptPipeline (raw_chat False) feeds for one row's prompt."""
    if isinstance(prompt, list):
        prompt = tokenizer.apply_chat_template(
            prompt, tokenize=False, add_generation_prompt=True, enable_thinking=enable_thinking
        )
    return tokenizer.encode(prompt)


@pytest.mark.parametrize("thinking", [False, True])
def test_prompt_token_ids_equal_chatlearns(tmp_path, model_folder, thinking):
    from transformers import AutoTokenizer

    model = model_folder("qwen3-0.6b", num_layers=1, hidden_size=64, intermediate_size=128)
    tokenizer = AutoTokenizer.from_pretrained(model)
    rows = math_rows(3)
    rows.append({**rows[0], "prompt": f"Plain text, no template. {INSTRUCTION}"})
    data = write_json_lines(rows, tmp_path / "train.json")
    conversion = convert(
        "chatlearn",
        FSDP,
        [
            f"runtime_args.data_path={data}",
            f"models.policy.enable_thinking={thinking}",
            f"models.policy_trainer.load={model}",
        ],
    )
    config = config_from_mapping(conversion.config, "converted").data
    dataset = PromptDataset(
        read_rows(config.train_files),
        tokenizer,
        prompt_key=config.prompt_key,
        answer_key=config.answer_key,
        chat_template=config.chat_template,
        max_prompt_length=config.max_prompt_length,
        filter_overlong_prompts=config.filter_overlong_prompts,
        apply_chat_template_kwargs=config.apply_chat_template_kwargs,
    )
    assert len(dataset) == len(rows)
    for at, row in enumerate(rows):
        item = dataset[at]
        assert item.prompt_ids == chatlearn_ids(tokenizer, row["prompt"], thinking)
        assert item.ground_truth == row["reward_model"]["ground_truth"]
        assert item.data_source == row["data_source"]
    templated = tokenizer.decode(dataset[0].prompt_ids)
    assert templated.endswith(
        "<|im_start|>assistant\n" + ("" if thinking else "<think>\n\n</think>\n\n")
    )
