"""Rule-based scorers, custom reward files, and the process pool with timeouts and errors."""

import textwrap

import pytest
import torch

from rl.core.errors import ConfigError
from rl.core.rewards import (
    RewardManager,
    RewardModelScorer,
    RewardRequest,
    arithmetic,
    default_compute_score,
    gsm8k,
    gsm8k_lenient,
    last_boxed,
    load_custom_reward,
    math_reward,
    math_verify,
)
from rl.core.rewards.model_scorer import HFClassifier


def test_gsm8k():
    """verl's rule (`openai/gsm8k`, `gsm8k`); test_verl_scorers holds it to verl's own."""
    assert gsm8k("so the total is #### 1,234", "1234") == 1.0
    assert gsm8k("#### 12 then #### 13", "13") == 1.0
    assert gsm8k("#### $5.00", "5") == 0.0  # verl reads no `$` and compares text
    assert gsm8k("the answer is 13", "13") == 0.0  # strict needs ####
    assert gsm8k("the answer is 13", "13", method="flexible") == 1.0
    assert gsm8k("#### 14", "13") == 0.0
    assert gsm8k("#### 13", 13) == 0.0  # a number as ground truth never equals the text


def test_gsm8k_lenient():
    """rl's lenient reading (`gsm8k_lenient`): what verl's rule misses scores here."""
    assert gsm8k_lenient("so the total is #### 1,234", "1234") == 1.0
    assert gsm8k_lenient("#### 12 then #### 13", "13") == 1.0
    assert gsm8k_lenient("#### $5.00", "5") == 1.0
    for written in ("####42", "#### $42", "#### 42.", "#### 42.0", "#### 042"):
        assert gsm8k_lenient(written, "42") == 1.0 and gsm8k(written, "42") == 0.0, written
    assert gsm8k_lenient("#### 42" + " " * 400, 42) == 1.0  # outside verl's 300 characters
    assert gsm8k_lenient("the answer is 13", "13") == 0.0  # strict needs ####
    assert gsm8k_lenient("the answer is 13", "13", strict=False) == 1.0
    assert gsm8k_lenient("#### 14", "13") == 0.0


def test_math_boxed():
    """verl's MATH rule (`math_reward`) and rl's math-verify one (`math_verify`)."""
    assert last_boxed(r"x \boxed{\frac{1}{2}} y") == r"\frac{1}{2}"
    assert last_boxed(r"\boxed{a} then \boxed{{b}+c}") == "{b}+c"
    assert last_boxed("no box") is None
    for score in (math_reward, math_verify):
        assert score(r"so \boxed{\dfrac{1}{2}}", r"\frac{1}{2}") == 1.0
        assert score(r"\boxed{\left( 1,2 \right)}", "(1,2)") == 1.0
        assert score(r"\boxed{4}", "5") == 0.0
        assert score("4", "4") == 0.0
    assert math_verify(r"\boxed{ 3.0 }", "3") == 1.0
    assert math_reward(r"\boxed{ 3.0 }", "3") == 0.0  # verl's normal form is textual
    assert math_reward(r"\boxed{0.5}", r"\frac12") == 1.0


def test_arithmetic_and_registry():
    assert arithmetic("12", "12") == 1.0 and arithmetic("12<eos>", "12") == 1.0
    assert arithmetic("1", "12") == 0.0 and arithmetic("", "3") == 0.0
    assert arithmetic("-3", "-3") == 1.0
    assert default_compute_score("openai/gsm8k", "#### 7", "7") == 1.0
    with pytest.raises(ValueError, match=r"no rule-based reward for data_source 'chess' \(known: "):
        default_compute_score("chess", "x", "y")


def write_reward_file(folder):
    path = folder / "my_reward.py"
    path.write_text(
        textwrap.dedent("""
        import os
        import time

        def compute_score(data_source, solution_str, ground_truth, extra_info=None):
            if solution_str == "crash":
                os._exit(3)
            if solution_str == "boom":
                raise RuntimeError("bad sample")
            if solution_str == "hang":
                time.sleep(60)
            if solution_str == "dict":
                return {"score": 0.5, "format": 1.0}
            return float(solution_str == ground_truth)

        def helper():
            return 1
    """)
    )
    return path


def requests(*solutions):
    return [RewardRequest("custom", s, "yes") for s in solutions]


def test_custom_function_in_process(tmp_path):
    manager = RewardManager(str(write_reward_file(tmp_path)))
    result = manager.score(requests("yes", "no", "boom", "dict"))
    assert result.scores == [1.0, 0.0, 0.0, 0.5]
    assert result.metrics["reward/errors"] == 1.0 and result.metrics["reward/format"] == 1.0


def test_pool_survives_errors_and_hangs(tmp_path):
    manager = RewardManager(str(write_reward_file(tmp_path)), num_workers=2, timeout_s=1.0)
    try:
        result = manager.score(requests("yes", "hang", "boom", "no", "yes"))
        assert result.scores == [1.0, 0.0, 0.0, 0.0, 1.0]
        assert result.metrics["reward/timeouts"] == 1.0 and result.metrics["reward/errors"] == 1.0
        again = manager.score(requests("yes"))  # the pool still works afterwards
        assert again.scores == [1.0]
        crashed = manager.score(requests("crash"))  # os._exit is trapped: the worker lives on
        assert crashed.scores == [0.0] and crashed.metrics["reward/errors"] == 1.0
        assert crashed.errors == ["called os._exit(3)"]
        assert manager.score(requests("yes", "no")).scores == [1.0, 0.0]
    finally:
        manager.close()


def test_reward_scale_gives_plus_minus_scale(tmp_path):
    manager = RewardManager(str(write_reward_file(tmp_path)), reward_scale=5.0)
    assert manager.score(requests("yes", "no", "boom")).scores == [5.0, -5.0, -5.0]


def test_custom_file_errors(tmp_path):
    with pytest.raises(
        ConfigError,
        match=r"reward.custom_reward_function.path = '.*missing.py' does not exist",
    ):
        load_custom_reward(str(tmp_path / "missing.py"))
    path = write_reward_file(tmp_path)
    with pytest.raises(
        ConfigError, match=r"has no function 'score_it' .*functions found: compute_score, helper"
    ):
        load_custom_reward(str(path), "score_it")
    text = tmp_path / "reward.txt"
    text.write_text("x = 1")
    with pytest.raises(ConfigError, match=r"reward.txt is not a Python \(.py\) file"):
        load_custom_reward(str(text))


def test_custom_file_that_fails_to_import_names_the_file_and_the_error(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("import no_such_module_here\n")
    with pytest.raises(
        ConfigError,
        match=r"broken.py could not be imported \(reward.custom_reward_function.path\): "
        r"ModuleNotFoundError: No module named 'no_such_module_here'",
    ):
        load_custom_reward(str(broken))
    syntax = tmp_path / "syntax.py"
    syntax.write_text("def compute_score(:\n")
    with pytest.raises(ConfigError, match=r"syntax.py could not be imported .*SyntaxError"):
        load_custom_reward(str(syntax))


def test_custom_function_with_the_wrong_signature_fails_at_load(tmp_path):
    path = tmp_path / "two_args.py"
    path.write_text("def compute_score(solution_str, ground_truth):\n    return 1.0\n")
    with pytest.raises(
        ConfigError,
        match=r"two_args.py: compute_score\(solution_str, ground_truth\) cannot be called as "
        r"compute_score\(data_source=..., solution_str=..., ground_truth=..., extra_info=...\)",
    ):
        load_custom_reward(str(path))
    with pytest.raises(ConfigError, match=r"extra_info=..., scale=...\) .*reward_kwargs"):
        load_custom_reward(str(write_reward_file(tmp_path)), reward_kwargs={"scale": 2})


KEYWORD_REWARD = """
import asyncio

def compute_score(solution_str, ground_truth, extra_info, data_source, scale=1.0, bonus=0.0):
    # verl calls by keyword: the order of the parameters does not matter there
    return scale * (solution_str == ground_truth) + bonus + extra_info["index"]

async def compute_score_async(data_source, solution_str, ground_truth, extra_info=None, scale=1.0):
    await asyncio.sleep(0)
    return scale * (solution_str == ground_truth)
"""


def keyword_requests():
    return [
        RewardRequest("custom", "yes", "yes", extra_info={"index": 10}),
        RewardRequest("custom", "no", "yes", extra_info={"index": 20}),
    ]


@pytest.mark.parametrize("num_workers", [0, 1])
def test_custom_function_is_called_as_verl_calls_it(tmp_path, num_workers):
    """By keyword, with reward_kwargs merged in (verl's get_custom_reward_fn); async too."""
    path = tmp_path / "keywords.py"
    path.write_text(KEYWORD_REWARD)
    manager = RewardManager(
        str(path), reward_kwargs={"scale": 3.0, "bonus": 0.5}, num_workers=num_workers
    )
    try:
        assert manager.score(keyword_requests()).scores == [13.5, 20.5]
    finally:
        manager.close()
    awaited = RewardManager(str(path), "compute_score_async", reward_kwargs={"scale": 2.0})
    assert awaited.score(keyword_requests()).scores == [2.0, 0.0]


def test_reward_kwargs_without_a_function_are_refused():
    from rl.core.config import load_config

    with pytest.raises(ConfigError, match=r"reward.custom_reward_function.reward_kwargs = .*path"):
        load_config(None, ["reward.custom_reward_function.reward_kwargs.scale=2"])


def test_reward_model_scorer_matches_a_manual_forward():
    from transformers import Qwen2Config, Qwen2ForSequenceClassification

    from rl.core.models import build_char_tokenizer

    tokenizer = build_char_tokenizer()
    tokenizer.padding_side = "right"
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=128,
        num_labels=1,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForSequenceClassification(config).eval()
    scorer = RewardModelScorer(tokenizer, HFClassifier(model, tokenizer, batch_size=2))
    reqs = [
        RewardRequest("x", "12", None, prompt_str="5+7="),
        RewardRequest("x", "3", None, prompt_str="1+2="),
        RewardRequest("x", "100", None, prompt_str="99+1="),
    ]
    result = scorer.score(reqs)
    for request, score in zip(reqs, result.scores, strict=True):
        ids = torch.tensor([tokenizer(request.prompt_str + request.solution_str).input_ids])
        with torch.no_grad():
            expected = model(input_ids=ids).logits[0, 0].item()
        assert score == pytest.approx(expected, abs=1e-5)


def test_a_reward_model_reads_the_chat_through_its_own_template_as_verl_s_reward_loop(
    model_folder,
):
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(model_folder("qwen2.5-0.5b", num_layers=2))
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=64,
        num_labels=1,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForSequenceClassification(config).eval()
    scorer = RewardModelScorer(tokenizer, HFClassifier(model, tokenizer, batch_size=2))
    chat = [{"role": "user", "content": "What is 5+7?"}]
    prompt = tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    chatted = [
        RewardRequest("x", answer, None, prompt_str=prompt, chat=chat)
        for answer in ["12", "3", "100"]
    ]
    # verl's rendering: the assistant's turn closed, as its reward loop hands it to the model
    assert scorer.text(chatted[0]) == prompt + "12<|im_end|>\n"
    result = scorer.score(chatted)
    for request, score in zip(chatted, result.scores, strict=True):
        ids = tokenizer.apply_chat_template(
            [*chat, {"role": "assistant", "content": request.solution_str}], tokenize=False
        )
        ids = torch.tensor([tokenizer(ids).input_ids])
        with torch.no_grad():
            assert score == pytest.approx(model(input_ids=ids).logits[0, 0].item(), abs=1e-5)
    # without the messages (a plain prompt) the text is the prompt's and the response's
    plain = RewardRequest("x", "12", None, prompt_str=prompt)
    assert scorer.text(plain) == prompt + "12"
    assert scorer.score([plain]).scores[0] != pytest.approx(result.scores[0], abs=1e-6)
