"""rl scores every generated response exactly as verl 0.6.1, 0.7.1 and 0.9.1 do.

The oracle is verl's own scorer files (`verl/utils/reward_score/{gsm8k,math_reward,
math_dapo}.py`), loaded by path from each fetched release, and the routing of its
`default_compute_score`, read from its source. The cases are built combinatorially in
`_verl_cases.py`.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from typing import Any

import pytest

from rl.core.errors import ConfigError
from rl.core.rewards import (
    RewardManager,
    RewardRequest,
    code,
    dapo_rule,
    default_compute_score,
    geo3k,
    gsm8k_rule,
    known_data_sources,
    math_rule,
    rule_based,
    scorer_for,
)
from rl.core.rewards.values import read_reward

VERL_RELEASES = ("0.6.1", "0.7.1", "0.9.1")  # those the root conftest's verl_release finds
LATEST = VERL_RELEASES[-1]


@pytest.fixture(autouse=True)
def quiet():
    """verl's MATH scorer prints every exception it catches."""
    with contextlib.redirect_stdout(io.StringIO()):
        yield


def outcome(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """("ok", result) or ("raised", None)."""
    try:
        return "ok", fn(*args, **kwargs)
    except Exception:
        return "raised", None


def shown(wrong: list[tuple[Any, ...]], cases: list[Any]) -> str:
    """The first few disagreements, for a failing assertion."""
    return f"{len(wrong)} of {len(cases)} cases differ, e.g. {wrong[:5]}"


def mismatches(cases, rl_fn, verl_fn, **kwargs) -> list[tuple[Any, ...]]:
    """(solution, truth, rl's outcome, verl's) wherever the two differ."""
    found = []
    for solution, truth in cases:
        ours, theirs = (
            outcome(rl_fn, solution, truth, **kwargs),
            outcome(verl_fn, solution, truth, **kwargs),
        )
        if ours != theirs:
            found.append((solution, truth, ours, theirs))
    return found


# ------------------------------------------------------------------ the cases themselves


def test_the_generated_sets_are_large_and_varied(answer_cases):
    gsm8k, math, dapo = (
        answer_cases.gsm8k_cases(),
        answer_cases.math_cases(),
        answer_cases.dapo_cases(),
    )
    assert len(gsm8k) > 10_000 and len(math) > 5_000 and len(dapo) > 10_000
    # both outcomes occur often, so agreement is not agreement on zeros
    assert 500 < sum(gsm8k_rule.gsm8k(s, t) == 1.0 for s, t in gsm8k) < len(gsm8k) - 500
    assert 500 < sum(math_rule.math_reward(s, t) == 1.0 for s, t in math) < len(math) - 500
    scores = [outcome(dapo_rule.math_dapo, s, t)[1] for s, t in dapo]
    right = sum(1 for r in scores if r is not None and r["acc"])
    assert 500 < right < len(dapo) - 500


# ------------------------------------------------------------------ rl == verl, per release


@pytest.mark.parametrize("version", VERL_RELEASES)
@pytest.mark.parametrize("method", ["strict", "flexible"])
def test_gsm8k_scores_as_verl(version, method, verl_scorers, answer_cases):
    verl = verl_scorers(version).gsm8k
    cases = answer_cases.gsm8k_cases()
    wrong = mismatches(cases, gsm8k_rule.gsm8k, verl.compute_score, method=method)
    assert not wrong, shown(wrong, cases)
    for solution, _ in cases[::50]:
        assert gsm8k_rule.extract_gsm8k_answer(solution, method) == verl.extract_solution(
            solution, method
        )


@pytest.mark.parametrize("version", VERL_RELEASES)
def test_math_scores_as_verl(version, verl_scorers, answer_cases):
    verl = verl_scorers(version).math_reward
    cases = answer_cases.math_cases()
    wrong = mismatches(cases, math_rule.math_reward, verl.compute_score)
    assert not wrong, shown(wrong, cases)


@pytest.mark.parametrize("version", VERL_RELEASES)
def test_math_normal_form_is_verls(version, verl_scorers, answer_cases):
    verl = verl_scorers(version).math_reward
    texts = {*answer_cases.MATH_ANSWERS, *answer_cases.MATH_TRUTHS}
    for text in texts:
        ours = outcome(math_rule.normalize_math_answer, text)
        assert ours == outcome(verl.strip_string, text), text


def dapo_options(version: str) -> dict[str, Any]:
    """verl before 0.9 has no `\\boxed{}` fallback when there is no `Answer:` line."""
    return {} if version == LATEST else {"box_fallback": False}


@pytest.mark.parametrize("version", VERL_RELEASES)
def test_math_dapo_scores_as_verl(version, verl_scorers, answer_cases):
    verl = verl_scorers(version).math_dapo
    cases = answer_cases.dapo_cases()
    wrong = []
    for solution, truth in cases:
        ours = outcome(dapo_rule.math_dapo, solution, truth, **dapo_options(version))
        theirs = outcome(verl.compute_score, solution, truth)
        if ours != theirs:
            wrong.append((solution, truth, ours, theirs))
        elif ours[0] == "ok":  # the same types, score and metrics once read as any reward is
            assert [type(v) for v in ours[1].values()] == [type(v) for v in theirs[1].values()]
            assert read_reward(ours[1]) == read_reward(theirs[1])
    assert not wrong, shown(wrong, cases)


@pytest.mark.parametrize("version", VERL_RELEASES)
def test_math_dapo_strict_box_scores_as_verl(version, verl_scorers, answer_cases):
    verl = verl_scorers(version).math_dapo
    cases = answer_cases.dapo_strict_box_cases()
    wrong = mismatches(cases, dapo_rule.math_dapo, verl.compute_score, strict_box_verify=True)
    assert not wrong, shown(wrong, cases)
    for pause in answer_cases.PAUSE_INDICES:
        found = mismatches(
            cases[::5],
            dapo_rule.math_dapo,
            verl.compute_score,
            strict_box_verify=True,
            pause_tokens_index=list(pause),
        )
        assert not found, (pause, shown(found, cases[::5]))


@pytest.mark.parametrize("version", VERL_RELEASES)
def test_dapo_normal_form_is_verls(version, verl_scorers, answer_cases):
    verl = verl_scorers(version).math_dapo
    for text in {*answer_cases.DAPO_ANSWERS, *answer_cases.DAPO_TRUTHS, *answer_cases.MATH_ANSWERS}:
        assert dapo_rule.normalize_final_answer(text) == verl.normalize_final_answer(text), text


@pytest.mark.parametrize("version", VERL_RELEASES)
def test_geo3k_scores_as_verls(version, verl_scorers):
    """verl's geo3k rule (its file, run with mathruler) is the oracle."""
    pytest.importorskip("mathruler")
    verl = verl_scorers(version).geo3k
    responses = [
        "<think>base times height over two</think> The area is \\boxed{12}.",
        "The area is \\boxed{12}.",
        "<think>hmm</think> \\boxed{\\frac{24}{2}}",
        "<think>x</think> \\boxed{13}",
        "<think>unclosed \\boxed{12}",
        "12",
        "<think>a</think>\\boxed{12.0}",
        "<think>a</think>\\boxed{2\\sqrt{3}}",
    ]
    for truth in ("12", "2\\sqrt{3}", "12.0"):
        for response in responses:
            assert geo3k.geo3k(response, truth) == verl.compute_score(response, truth), (
                response,
                truth,
            )
    assert default_compute_score("hiyouga/geometry3k", responses[0], "12") == 1.0


# ------------------------------------------------------------------ verl's routing


def expected_scorer(modules: list[str]):
    """rl's scorer for a verl branch that imports `modules`; None where rl has none."""
    if modules == ["gsm8k"]:
        return gsm8k_rule.gsm8k
    if modules == ["math_reward"]:
        return math_rule.math_reward
    if modules == ["math_dapo"]:
        return dapo_rule.math_dapo
    if "prime_code" in modules:  # rl runs code in its own sandbox
        return code.code
    if modules == ["geo3k"]:
        return geo3k.geo3k
    return None


@pytest.mark.parametrize("version", VERL_RELEASES)
def test_every_verl_data_source_routes_to_the_same_rule(version, verl_routes):
    routes = verl_routes(version)
    assert len(routes) >= 6, routes  # the parse found the branches
    for route in routes:
        scorer = expected_scorer(route["modules"])
        for name in route["names"]:
            assert scorer_for(name) is scorer, (name, route["modules"])
        for prefix in route["prefixes"]:
            for name in (prefix, f"{prefix}24", f"{prefix}_2025", f"{prefix}-hard"):
                assert scorer_for(name) is scorer, (name, route["modules"])
    prefixes = [p for route in routes for p in route["prefixes"]]
    assert prefixes == ["aime"]


@pytest.mark.parametrize("version", VERL_RELEASES)
def test_default_compute_score_answers_as_verls(version, verl_scorers, answer_cases):
    """verl's `default_compute_score` returns float(result), or the dict as it is."""
    verl = verl_scorers(version)
    dapo = dapo_options(version)
    samples = [
        ("openai/gsm8k", answer_cases.gsm8k_cases()[::97], verl.gsm8k.compute_score, {}),
        ("gsm8k", answer_cases.gsm8k_cases()[::89], verl.gsm8k.compute_score, {}),
        (
            "HuggingFaceH4/MATH-500",
            answer_cases.math_cases()[::31],
            verl.math_reward.compute_score,
            {},
        ),
        ("aime24", answer_cases.dapo_cases()[::41], verl.math_dapo.compute_score, dapo),
        ("math", answer_cases.dapo_cases()[::43], verl.math_dapo.compute_score, dapo),
    ]
    for data_source, cases, verl_fn, options in samples:
        scorer = scorer_for(data_source)
        for solution, truth in cases:
            theirs = outcome(verl_fn, solution, truth)
            if options:
                ours = outcome(scorer, solution, truth, **options)
            else:
                ours = outcome(default_compute_score, data_source, solution, truth)
            if theirs[0] == "ok" and not isinstance(theirs[1], dict):
                theirs = ("ok", float(theirs[1]))
                assert isinstance(ours[1], float)
            assert ours == theirs, (data_source, solution, truth)


def test_verl_releases_agree_except_for_the_dapo_box_fallback(verl_scorers, answer_cases):
    """gsm8k and math_reward are the same in all three releases; math_dapo of 0.9.1 differs
    from 0.6.1 and 0.7.1 only where a response has no `Answer:` line (or `Answer: [INVALID]`)
    but a box in its last 100 characters."""
    releases = [verl_scorers(version) for version in VERL_RELEASES]
    for name, cases in (
        ("gsm8k", answer_cases.gsm8k_cases()),
        ("math_reward", answer_cases.math_cases()),
    ):
        for solution, truth in cases:
            results = {outcome(getattr(r, name).compute_score, solution, truth) for r in releases}
            assert len(results) == 1, (name, solution, truth, results)
    differing = 0
    for solution, truth in answer_cases.dapo_cases():
        old, middle, new = (outcome(r.math_dapo.compute_score, solution, truth) for r in releases)
        assert old == middle
        if old == new:
            continue
        differing += 1
        tail = solution[-dapo_rule.WINDOW :]
        assert dapo_rule.answer_line_verdict(tail, truth)[1] == dapo_rule.INVALID
        assert "\\boxed{" in tail[-dapo_rule.BOX_WINDOW :]
    assert differing > 100


# ------------------------------------------------------------------ the registry in rl


def test_rl_own_data_sources_stay():
    assert scorer_for("arithmetic") is rule_based.arithmetic
    assert scorer_for("calculator") is rule_based.calculator
    assert scorer_for("gsm8k_lenient") is rule_based.gsm8k_lenient
    assert scorer_for("math_verify") is rule_based.math_verify
    assert scorer_for("gsm8k") is gsm8k_rule.gsm8k
    for name in code.DATA_SOURCES:
        assert scorer_for(name) is code.code
    assert scorer_for("chess") is None and scorer_for("AIME24") is None and scorer_for("") is None


def test_unknown_data_sources_are_a_config_error_naming_the_known_ones():
    known = known_data_sources()
    assert "aime*" in known and "math_dapo" in known and "gsm8k_lenient" in known
    with pytest.raises(
        ConfigError, match=r"no rule-based reward for data_source 'chess' \(known: "
    ):
        default_compute_score("chess", "x", "y")
    with pytest.raises(ConfigError, match=r"'numina_cn_k12' \(verl scores it with its prime_math "):
        default_compute_score("numina_cn_k12", "x", "y")


def test_a_dapo_dict_goes_through_the_reward_path_and_acc_is_a_metric(tmp_path):
    solutions = ["Answer: 42", "Answer: 41", "no answer at all", "Answer: 42"]
    requests = [RewardRequest("aime_2024", s, "42") for s in solutions]
    result = RewardManager().score(requests)
    assert result.scores == [1.0, -1.0, -1.0, 1.0]
    assert result.metrics["reward/acc"] == 0.5 and result.metrics["reward/errors"] == 0.0
    assert result.metrics["reward/mean"] == 0.0
    custom = tmp_path / "dapo.py"
    custom.write_text(
        "from rl.core.rewards import math_dapo\n"
        "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
        "    return math_dapo(solution_str, ground_truth)\n"
    )
    same = RewardManager(str(custom)).score(requests)
    assert same.scores == result.scores and same.metrics == result.metrics
    scaled = RewardManager(reward_scale=2.0).score(requests)
    assert scaled.scores == [2.0, -2.0, -2.0, 2.0]
