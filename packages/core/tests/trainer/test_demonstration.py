"""Multi-turn SFT demonstrations: laid out as the agent loop lays out a trajectory (the
chat template's rendering of the conversation, token for token), the loss on the model's
turns only; the built-in calculator task's rows and its scorer."""

from __future__ import annotations

import pytest

from rl.core.agent.tools import evaluate
from rl.core.data import PromptDataset, SourcedRow
from rl.core.demo.calculator import calculator_rows
from rl.core.errors import DataError
from rl.core.models.tiny import build_char_tokenizer
from rl.core.rewards.registry import default_compute_score
from rl.core.trainer.demonstration import demonstration_tokens
from rl.core.trainer.sft import sft_batch

TOOL_DEMO = [
    {"role": "assistant", "content": "calculator(7*8-5)"},
    {"role": "tool", "content": "51"},
    {"role": "assistant", "content": "51"},
]


@pytest.fixture(scope="module")
def tokenizer():
    return build_char_tokenizer()


def test_a_demonstration_is_the_rendered_conversation_with_the_tool_turn_masked(tokenizer):
    ids, mask = demonstration_tokens(TOOL_DEMO, tokenizer, "row 0")
    prompt = [{"role": "user", "content": "7*8-5="}]
    whole = tokenizer.apply_chat_template(prompt + TOOL_DEMO, tokenize=False)
    assert tokenizer.encode("7*8-5=") + ids == tokenizer.encode(whole)
    text = [tokenizer.decode([t]) for t, keep in zip(ids, mask, strict=True) if not keep]
    assert "".join(text) == "#51#"
    assert sum(mask) == len("calculator(7*8-5)") + 1 + len("51") + 1  # each turn and its EOS


def test_sft_batches_train_on_the_model_turns_only(tokenizer):
    rows = [
        SourcedRow("f", 0, {"prompt": "7*8-5=", "answer": "51", "demonstration": TOOL_DEMO}),
        SourcedRow("f", 1, {"prompt": "2+2=", "answer": "4"}),
    ]
    data = PromptDataset(rows, tokenizer, chat_template="native")
    batch = sft_batch([data[0], data[1]], tokenizer, width=32)
    mask = batch["response_mask"]
    assert mask[0].sum() == 21 and mask[0, 18:22].sum() == 0  # "#51#" read, not learned
    assert batch["attention_mask"][0, -32:].sum() == 25  # the tool turn is attended to
    assert mask[1].tolist()[:3] == [1, 1, 0]  # the plain row: answer and EOS, as before
    assert tokenizer.decode(batch["responses"][1, :2]) == "4<eos>"


@pytest.mark.parametrize(
    ("demonstration", "message"),
    [
        ("51", "must be a non-empty list"),
        ([], "must be a non-empty list"),
        ([{"role": "assistant"}], r"demonstration\[0\] needs a text 'content'"),
        ([{"role": "system", "content": "x"}], "has role 'system'"),
        (TOOL_DEMO[:2], "must start with an assistant turn .* and end with one"),
        (TOOL_DEMO[1:], "must start with an assistant turn"),
    ],
)
def test_a_bad_demonstration_is_one_error_naming_the_row(tokenizer, demonstration, message):
    with pytest.raises(DataError, match=f"data row 3: .*{message}"):
        demonstration_tokens(demonstration, tokenizer, "data row 3")


def test_calculator_rows_are_right_and_half_demonstrate_the_tool():
    rows = calculator_rows(400, seed=5)
    assert rows == calculator_rows(400, seed=5)
    for row in rows:
        expression = row["prompt"].removesuffix("=")
        assert row["answer"] == str(evaluate(expression))
        assert row["demonstration"][-1] == {"role": "assistant", "content": row["answer"]}
    with_tool = [r for r in rows if len(r["demonstration"]) == 3]
    assert 0.4 < len(with_tool) / len(rows) < 0.6
    assert all(r["demonstration"][1]["content"] == r["answer"] for r in with_tool)


@pytest.mark.parametrize(
    ("solution", "score"),
    [
        ("calculator(7*8-5)51", 1.0),  # the model's turns; the tool's "#51#" is not in them
        ("51", 1.0),
        ("-12", 0.0),
        ("calculator(7*8-5)", 0.0),  # no final answer (the 5 is the expression's)
        ("calculator(7*8-5)51 or so", 0.0),
        ("5", 0.0),
    ],
)
def test_the_calculator_score_is_the_exact_final_answer(solution, score):
    assert default_compute_score("calculator", solution, "51") == score
