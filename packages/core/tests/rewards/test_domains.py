"""Reward routing by domain (`reward.domains`, ROLL's `rewards.<domain>`): which domain a
row is scored in, load-time refusals naming the file and row, and a batch of several
domains scored each by its own scorer, in the batch's order, with per-domain metrics."""

from __future__ import annotations

import json

import pytest

from rl.core.config import ConfigError, load_config
from rl.core.data import PromptDataset
from rl.core.data.reader import SourcedRow
from rl.core.models import build_char_tokenizer
from rl.core.rewards.domains import DomainRewards, DomainRouting, domain_metrics
from rl.core.rewards.types import RewardRequest

ROWS = [
    {"prompt": "1+1=", "ground_truth": "2", "tag": "deepmath_103k"},
    {"prompt": "2+2=", "ground_truth": "4", "tag": "aime", "domain": "judged"},
    {"prompt": "3+3=", "ground_truth": "6", "tag": "KodCode"},
    {"prompt": "4+4=", "ground_truth": "8", "tag": "other"},
]


def config(*extra):
    return load_config(
        None,
        [
            "data.data_source_key=tag",
            "data.answer_key=ground_truth",
            "reward.domains.math.scorer=data_source",
            "reward.domains.math.tag_included=[deepmath_103k,aime]",
            "reward.domains.code.scorer=data_source",
            "reward.domains.code.tag_included=[KodCode]",
            "reward.domains.judged.scorer=data_source",
            *extra,
        ],
    )


def dataset(rows=ROWS):
    sourced = [SourcedRow("data/mix.jsonl", i, row) for i, row in enumerate(rows)]
    return PromptDataset(
        sourced, build_char_tokenizer(), answer_key="ground_truth", data_source_key="tag"
    )


def test_the_domain_column_wins_then_the_tag_then_the_default():
    routing = DomainRouting(config("data.default_domain=math"))
    assert [routing.domain_of(item) for item in dataset()] == ["math", "judged", "code", "math"]


def test_a_row_without_a_configured_domain_is_refused_naming_file_row_and_domains():
    routing = DomainRouting(config())
    with pytest.raises(ConfigError) as refused:
        routing.check(dataset())
    message = str(refused.value)
    assert message.startswith("data/mix.jsonl, row 3: its tag 'other' is in no ")
    assert "['code', 'judged', 'math']" in message and "data.default_domain" in message
    bad = [*ROWS[:3], {**ROWS[0], "domain": "poetry"}]
    with pytest.raises(ConfigError, match=r"row 3: its 'domain' column says 'poetry'"):
        routing.check(dataset(bad))


def test_a_tag_in_two_domains_and_a_default_that_is_no_domain_are_refused():
    with pytest.raises(ConfigError, match=r"tag 'aime' is also in reward.domains.math"):
        DomainRouting(config("reward.domains.code.tag_included=[KodCode,aime]"))
    with pytest.raises(ConfigError, match=r"data.default_domain = 'poetry' is not a domain"):
        DomainRouting(config("data.default_domain=poetry"))


def test_without_domains_a_row_is_routed_by_its_data_source():
    routing = DomainRouting(load_config(None, ["data.data_source_key=tag"]))
    assert not routing.enabled
    assert [routing.domain_of(item) for item in dataset()][:3] == [
        "deepmath_103k",
        "aime",
        "KodCode",
    ]


def test_a_scorer_rl_does_not_have_or_an_option_it_does_not_take_is_refused():
    with pytest.raises(ConfigError, match=r"reward.domains.math.scorer = 'MathWorker': no such"):
        DomainRewards(config("reward.domains.math.scorer=MathWorker"))
    with pytest.raises(ConfigError, match=r"reward.domains.math.options = .*takes no options"):
        DomainRewards(config("reward.domains.math.options.reward_type=soft"))


SCORER = """
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    if solution_str == "boom":
        raise ValueError("boom")
    return {"score": float(solution_str == ground_truth), "acc": float(solution_str == ground_truth)}
"""


def test_each_domain_scores_its_rows_in_the_batch_order_with_its_own_metrics(tmp_path):
    path = tmp_path / "score.py"
    path.write_text(SCORER)
    rewards = DomainRewards(config(f"reward.custom_reward_function.path={path}"))
    requests = [
        RewardRequest("deepmath_103k", "2", "2", {}, domain="math"),
        RewardRequest("KodCode", "7", "6", {}, domain="code"),
        RewardRequest("aime", "boom", "4", {}, domain="math"),
        RewardRequest("KodCode", "6", "6", {}, domain="code"),
        RewardRequest("RLVR", "1", "1", {}, domain="judged"),
    ]
    result = rewards.score(requests)
    assert result.scores == [1.0, 0.0, 0.0, 1.0, 1.0]
    assert result.errors[2].startswith("ValueError: boom") and result.errors[0] == ""
    assert result.metrics["reward/errors"] == 1.0
    assert result.metrics["reward/math/error_rate"] == 0.5
    assert result.metrics["reward/code/error_rate"] == 0.0
    assert {"reward/math/time_s", "reward/code/time_s", "reward/judged/time_s"} <= set(
        result.metrics
    )
    rewards.close()


def test_domain_metrics_count_mean_and_accuracy_per_domain():
    metrics = domain_metrics(
        ["math", "code", "math", "code"],
        [1.0, 0.5, 0.0, -1.0],
        [{"acc": 1.0}, {}, {"acc": 0.0}, {}],
    )
    assert metrics == {
        "reward/code/mean": -0.25,
        "reward/code/accuracy": 0.5,  # no acc: the share of positive scores
        "reward/code/count": 2.0,
        "reward/math/mean": 0.5,
        "reward/math/accuracy": 0.5,
        "reward/math/count": 2.0,
    }


def test_domains_in_a_config_file_convert_typed(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(
        json.dumps(
            {"reward": {"domains": {"math": {"scorer": "data_source", "tag_included": ["a"]}}}}
        )
    )
    domain = load_config(path).reward.domains["math"]
    assert domain.tag_included == ("a",) and domain.timeout_s is None
    with pytest.raises(ConfigError, match=r"reward.domains.math.timeout_s"):
        load_config(None, ["reward.domains.math.timeout_s=-1"])


def test_a_domain_scored_by_data_source_needs_a_rule_for_each_rows_data_source():
    from rl.core.rewards import check_reward_inputs

    with pytest.raises(ConfigError, match=r"data/mix.jsonl, row 0: domain 'math' is scored by"):
        check_reward_inputs(config("data.default_domain=math"), dataset(), dataset())
    known = [{**row, "tag": "gsm8k"} for row in ROWS]
    check_reward_inputs(config("data.default_domain=math"), dataset(known), dataset(known))


SEES = """
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    return float(extra_info["tag"] == "aime" and extra_info["prompt_str"] == "Q?")
"""


def test_a_scorer_sees_the_rows_tag_and_rendered_prompt(tmp_path):
    path = tmp_path / "sees.py"
    path.write_text(SEES)
    rewards = DomainRewards(config(f"reward.custom_reward_function.path={path}"))
    request = RewardRequest("aime", "x", "y", {"id": 3}, prompt_str="Q?", domain="math")
    assert rewards.score([request]).scores == [1.0]
    rewards.close()


def test_scorer_options_that_cannot_score_are_refused_at_load_not_per_row():
    qa = ["reward.domains.qa.scorer=crossthinkqa", "reward.domains.qa.tag_included=[crossthinkqa]"]
    with pytest.raises(
        ConfigError, match=r"reward.domains.qa.options: crossthinkqa: reward_type=None"
    ):
        DomainRewards(config(*qa))
    with pytest.raises(ConfigError, match=r"response_length_penalty_coef=0.5"):
        DomainRewards(
            config(
                *qa,
                "reward.domains.qa.options.reward_type=soft",
                "reward.domains.qa.options.response_length_penalty_coef=0.5",
            )
        )
    DomainRewards(config(*qa, "reward.domains.qa.options.reward_type=soft")).close()


def test_a_code_sandbox_row_without_test_cases_is_refused_at_load_naming_the_row():
    from rl.core.errors import DataError
    from rl.core.rewards import check_reward_inputs

    code = ["reward.domains.code.scorer=code_sandbox", "data.default_domain=math"]
    tests = json.dumps([{"assert_code": "assert f() == 6"}])
    rows = [{**row, "tag": "gsm8k"} for row in ROWS]
    rows[2] = {**ROWS[2], "case_type": "assert", "test_cases": tests}
    check_reward_inputs(config(*code), dataset(rows), dataset(rows))
    bare = [*rows[:2], ROWS[2], rows[3]]
    with pytest.raises(DataError, match=r"data/mix.jsonl, row 2: domain 'code' is scored by"):
        check_reward_inputs(config(*code), dataset(bare), dataset(rows))


def test_a_code_domain_runs_its_rows_test_cases_in_the_scoring_pool():
    rewards = DomainRewards(
        config("reward.domains.code.scorer=code_sandbox", "reward.num_workers=1")
    )
    extra = {"case_type": "assert", "test_cases": [{"assert_code": "assert f() == 6"}]}
    right = "```python\ndef f():\n    return 6\n```"
    requests = [
        RewardRequest("KodCode", right, "", extra, domain="code"),
        RewardRequest("KodCode", right.replace("6", "7"), "", extra, domain="code"),
    ]
    assert rewards.score(requests).scores == [1.0, 0.0]
    rewards.close()
