"""Before training: rule-based rewards need a scorer for every data_source and an answer."""

import json

import pytest

from rl.core.config import load_config
from rl.core.data import PromptDataset, read_rows
from rl.core.errors import ConfigError, DataError
from rl.core.models import build_char_tokenizer
from rl.core.rewards.inputs import check_reward_inputs
from rl.core.trainer.build import build_context

KNOWN = (
    "DigitalLearningGmbH/MATH-lighteval, HuggingFaceH4/MATH-500, aime*, apps, arithmetic, "
    "calculator, code, codecontests, codeforces, gsm8k, gsm8k_lenient, hiyouga/geometry3k, "
    "judge_verdict, lighteval/MATH, math, math_dapo, math_dapo_reasoning, math_verify, "
    "openai/gsm8k, rl/squares, swe_patch, taco"
)


def dataset(folder, rows, name="train.jsonl", **options):
    path = folder / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return PromptDataset(read_rows(str(path)), build_char_tokenizer(), **options)


GOOD = {"prompt": "1+2=", "answer": "3", "data_source": "arithmetic"}


def config(*overrides):
    return load_config(overrides=list(overrides))


def test_good_rows_pass(tmp_path):
    rows = [GOOD, {**GOOD, "data_source": "openai/gsm8k"}]
    check_reward_inputs(config(), dataset(tmp_path, rows), dataset(tmp_path, rows, "val.jsonl"))


def test_any_data_source_starting_with_aime_has_a_scorer(tmp_path):
    rows = [{**GOOD, "data_source": name} for name in ("aime24", "aime_2025", "math_dapo")]
    check_reward_inputs(config(), dataset(tmp_path, rows), dataset(tmp_path, rows, "val.jsonl"))


def test_a_numeric_answer_for_a_text_comparing_scorer_is_refused(tmp_path):
    """verl's GSM8K, MATH and DAPO rules compare text: 42 would never score (silently)."""
    rows = [GOOD, {**GOOD, "data_source": "openai/gsm8k", "answer": 42}]
    train = dataset(tmp_path, rows)
    with pytest.raises(DataError) as failed:
        check_reward_inputs(config(), train, train)
    assert str(failed.value) == (
        f"{tmp_path / 'train.jsonl'}, row 1: the answer 42 (column 'answer', data.answer_key) "
        "is of type int, but the rule-based reward for data_source 'openai/gsm8k' compares answers "
        "as text, as verl's does: no response would ever score. Write the answers as strings "
        "(e.g. '42'), use data_source 'gsm8k_lenient' or 'math_verify', or set "
        "reward.custom_reward_function.path"
    )
    for lenient in ("gsm8k_lenient", "arithmetic"):
        rows = [{**GOOD, "data_source": lenient, "answer": 42}]
        check_reward_inputs(config(), dataset(tmp_path, rows), dataset(tmp_path, rows))


def test_a_verl_data_source_rl_cannot_score_says_which_verl_scorer_it_needs(tmp_path):
    train = dataset(tmp_path, [{**GOOD, "data_source": "numina_cn_k12"}])
    with pytest.raises(
        ConfigError,
        match=r"data_source 'numina_cn_k12' \(column 'data_source', data.data_source_key\) "
        r"has no rule-based reward \(verl scores it with its prime_math scorer, which rl does not "
        r"implement\); known: ",
    ):
        check_reward_inputs(config(), train, train)


def test_a_missing_answer_column_names_the_key_file_row_and_columns(tmp_path):
    rows = [GOOD, {"prompt": "2+2=", "solution": "4", "data_source": "arithmetic"}]
    train = dataset(tmp_path, [GOOD])
    val = dataset(tmp_path, rows, "val.jsonl")
    with pytest.raises(DataError) as failed:
        check_reward_inputs(config(), train, val)
    assert str(failed.value) == (
        f"{tmp_path / 'val.jsonl'}, row 1: no answer column 'answer' (data.answer_key); "
        "columns are ['data_source', 'prompt', 'solution'] (1 of 2 rows lack it). The "
        "rule-based reward for data_source 'arithmetic' needs the ground truth: set "
        "data.answer_key to the right column (dotted for a nested one, e.g. "
        "reward_model.ground_truth), or set reward.custom_reward_function.path"
    )


def test_a_nested_answer_key_names_the_keys_where_it_stops(tmp_path):
    rows = [{**GOOD, "reward_model": {"ground_truth": "3"}}]
    train = dataset(tmp_path, rows, answer_key="reward_model.ground_truht")
    with pytest.raises(
        DataError,
        match=r"row 0: no answer column 'reward_model.ground_truht' \(data.answer_key\); "
        r"'reward_model' has keys \['ground_truth'\] \(1 of 1 rows",
    ):
        check_reward_inputs(config(), train, train)


def test_a_null_answer_is_missing_too(tmp_path):
    train = dataset(tmp_path, [GOOD, {**GOOD, "answer": None}])
    with pytest.raises(DataError, match=r"row 1: the answer column 'answer' \(data.answer_key\) "):
        check_reward_inputs(config(), train, train)


def test_a_custom_function_or_a_reward_model_needs_no_answer_and_any_data_source(tmp_path):
    rows = [{"prompt": "hi", "data_source": "chat"}]
    custom = tmp_path / "r.py"
    custom.write_text(
        "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 1.0\n"
    )
    train = dataset(tmp_path, rows)
    check_reward_inputs(config(f"reward.custom_reward_function.path={custom}"), train, train)
    check_reward_inputs(config("reward.reward_model.path=some/model"), train, train)


def test_an_unknown_data_source_names_the_value_the_key_and_the_choices(tmp_path):
    train = dataset(tmp_path, [GOOD, {**GOOD, "data_source": "gsm8K"}])
    with pytest.raises(ConfigError) as failed:
        check_reward_inputs(config(), train, train)
    assert str(failed.value) == (
        f"{tmp_path / 'train.jsonl'}, row 1: data_source 'gsm8K' (column 'data_source', "
        f"data.data_source_key) has no rule-based reward; known: {KNOWN}. Fix the column or "
        "data.data_source_key, or set reward.custom_reward_function.path"
    )


def test_a_missing_data_source_column_says_so(tmp_path):
    train = dataset(tmp_path, [{"prompt": "1+2=", "answer": "3", "source": "arithmetic"}])
    with pytest.raises(ConfigError) as failed:
        check_reward_inputs(config(), train, train)
    assert str(failed.value) == (
        f"{tmp_path / 'train.jsonl'}, row 0: no data_source column 'data_source' "
        "(data.data_source_key) to choose the rule-based reward by; columns are ['answer', "
        f"'prompt', 'source']; known data_source values: {KNOWN}. Fix the column or "
        "data.data_source_key, or set reward.custom_reward_function.path"
    )


def test_build_context_checks_before_training(tmp_path):
    rows = [GOOD] * 7 + [{**GOOD, "data_source": "chess"}]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    run = config(
        f"data.train_files=[{tmp_path / 'train.jsonl'}]",
        "data.train_batch_size=8",
        f"trainer.output_dir={tmp_path / 'out'}",
    )
    with pytest.raises(ConfigError, match=r"data_source 'chess' \(column 'data_source'"):
        build_context(run, tmp_path / "out")  # an RL run: checked before any engine starts
