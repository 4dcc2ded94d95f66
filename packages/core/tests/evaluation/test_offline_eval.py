"""Offline evaluation (`rl.core.evaluation`): pass@k against brute-force enumeration,
per-source scores against a hand count, and the scorer's failure modes."""

from __future__ import annotations

import itertools
import math

import pytest

from rl.core.config import ConfigError
from rl.core.evaluation import EvalColumns, eval_config, evaluate, pass_at_k
from rl.core.rewards import default_compute_score


@pytest.mark.parametrize("n, correct, k", [(5, 0, 1), (5, 2, 1), (5, 2, 3), (6, 1, 6), (4, 4, 2)])
def test_pass_at_k_is_the_share_of_k_subsets_with_a_correct_response(n, correct, k):
    outcomes = [True] * correct + [False] * (n - correct)
    subsets = list(itertools.combinations(range(n), k))
    expected = sum(any(outcomes[i] for i in subset) for subset in subsets) / len(subsets)
    assert math.isclose(pass_at_k(n, correct, k), expected, rel_tol=1e-12)


def test_pass_at_k_needs_k_responses():
    with pytest.raises(ValueError, match="pass@3 needs at least 3"):
        pass_at_k(2, 1, 3)


def rows():
    """Two gsm8k rows (2 of 4 and 0 of 4 correct) and one arithmetic row (4 of 4)."""
    gsm = {"data_source": "openai/gsm8k"}
    return [
        {
            **gsm,
            "reward_model": {"ground_truth": "42"},
            "responses": ["#### 42", "#### 41", "#### 42", "no answer"],
        },
        {
            **gsm,
            "reward_model": {"ground_truth": "7"},
            "responses": ["#### 1", "#### 2", "#### 3", "#### 4"],
        },
        {
            "data_source": "arithmetic",
            "reward_model": {"ground_truth": "5"},
            "responses": ["5", "5", "5", "5"],
        },
    ]


def test_scores_and_pass_at_k_per_data_source():
    metrics = evaluate(rows(), default_compute_score, ks=(1, 2))
    assert metrics["test_score/openai/gsm8k"] == pytest.approx((2 / 4 + 0) / 2)
    assert metrics["test_score/arithmetic"] == pytest.approx(1.0)
    # pass@2 with 2 of 4 correct: 1 - C(2,2)/C(4,2) = 5/6; with none: 0
    assert metrics["pass@2/openai/gsm8k"] == pytest.approx((5 / 6 + 0) / 2)
    assert metrics["pass@1/openai/gsm8k"] == pytest.approx(0.25)
    assert metrics["eval/rows"] == 3 and metrics["eval/responses"] == 12
    assert metrics["eval/scorer_errors"] == 0


def test_a_scorer_that_raises_scores_zero_and_is_counted():
    def flaky(source, response, truth, extra):
        if response == "#### 41":
            raise RuntimeError("boom")
        return {"score": default_compute_score(source, response, truth)}

    metrics = evaluate(rows(), flaky)
    assert metrics["eval/scorer_errors"] == 1
    assert metrics["test_score/openai/gsm8k"] == pytest.approx(0.25)


def test_a_scorer_failing_on_most_responses_stops_the_evaluation():
    """Failures never pass for zero scores: above max_error_rate the evaluation ends with
    the count and the first error."""
    from rl.core.errors import RewardError

    def broken(source, response, truth, extra):
        raise KeyError("no_such_field")

    with pytest.raises(RewardError, match=r"failed on 12 of 12 responses .*first: row 0: KeyE"):
        evaluate(rows(), broken)
    metrics = evaluate(rows(), broken, max_error_rate=1.0)  # asked to tolerate them
    assert metrics["eval/scorer_errors"] == 12


def test_missing_columns_and_unknown_sources_are_clear_errors():
    with pytest.raises(ConfigError, match=r"row 0 has no column 'outputs' \(data.response_key\)"):
        evaluate(rows(), default_compute_score, EvalColumns(response_key="outputs"))
    unknown = [{**rows()[0], "data_source": "my/bench"}]
    with pytest.raises(ConfigError, match="no rule-based reward for data_source 'my/bench'"):
        evaluate(unknown, default_compute_score)


def test_verl_evaluation_yaml_layout_is_read_and_bad_keys_named():
    config = eval_config(
        {
            "data": {"path": "x.parquet", "response_key": "outputs"},
            "custom_reward_function": {"path": None, "name": "compute_score"},
            "ray_kwargs": {"ray_init": {"num_cpus": None}},
            "ks": [1, 4],
        }
    )
    assert config.data.response_key == "outputs" and config.ks == (1, 4)
    with pytest.raises(ConfigError, match="unknown key data.respone_key"):
        eval_config({"data": {"respone_key": "x"}})
    with pytest.raises(ConfigError, match="each k must be a positive integer"):
        eval_config({"ks": [0]})
    with pytest.raises(ConfigError, match="unknown key custom_reward_function.kwargs"):
        eval_config({"custom_reward_function": {"path": "f.py", "kwargs": {}}})
    options = {"path": "f.py", "reward_kwargs": {"scale": 2}}
    read = eval_config({"custom_reward_function": options})
    assert read.custom_reward_function_kwargs == {"scale": 2}
