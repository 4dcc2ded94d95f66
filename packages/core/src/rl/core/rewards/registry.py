"""Which scorer a row uses, from its `data_source`, and the custom reward function from a file.

verl's data sources are scored exactly as verl's `default_compute_score` scores them; rl's
own (`gsm8k_lenient`, `math_verify`, `arithmetic`, `calculator`, `code`, `judge_verdict`,
`swe_patch`) add to them.
Look a
data source up with `scorer_for`: besides the names in `SCORERS`, every name starting with a
key of `PREFIXED` (`aime24`, `aime_2025`, ...) has a scorer.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rl.core.config.paths import python_file
from rl.core.errors import ConfigError
from rl.core.imports import load_user_file
from rl.core.rewards import (
    code,
    dapo_rule,
    geo3k,
    gsm8k_rule,
    math_rule,
    rule_based,
    swe_patch,
)
from rl.core.rewards.async_score import AsyncScore

ScoreFn = Callable[..., Any]
Scorer = Callable[[str, Any], Any]  # (solution_str, ground_truth) -> float | {"score": ...}
# what a score function is called with, by keyword (here: the values a signature check binds)
SCORE_ARGUMENTS = {"data_source": "", "solution_str": "", "ground_truth": "", "extra_info": None}

MATH_DATA_SOURCES = (
    "lighteval/MATH",
    "DigitalLearningGmbH/MATH-lighteval",
    "HuggingFaceH4/MATH-500",
)
DAPO_DATA_SOURCES = ("math_dapo", "math", "math_dapo_reasoning")

SCORERS: dict[str, Scorer] = {
    # verl's names, verl's scores
    "openai/gsm8k": gsm8k_rule.gsm8k,
    **dict.fromkeys(MATH_DATA_SOURCES, math_rule.math_reward),
    **dict.fromkeys(DAPO_DATA_SOURCES, dapo_rule.math_dapo),
    # verl runs these in its sandbox or prime_code; rl in the agent's sandbox (rewards.code)
    **dict.fromkeys(code.DATA_SOURCES, code.code),
    # rl's own
    "gsm8k": gsm8k_rule.gsm8k,
    "gsm8k_lenient": rule_based.gsm8k_lenient,
    "math_verify": rule_based.math_verify,
    "arithmetic": rule_based.arithmetic,
    "calculator": rule_based.calculator,
    "judge_verdict": rule_based.judge_verdict,
    "swe_patch": swe_patch.swe_patch,  # a patch to the row's repository, its tests run
    "hiyouga/geometry3k": geo3k.geo3k,
    "rl/squares": rule_based.arithmetic,  # the visual demo: the first integer is the count  # verl's VL example: mathruler's grader + format
}
PREFIXED: dict[str, Scorer] = {"aime": dapo_rule.math_dapo}  # any data source starting so

# verl's scorers compare the ground truth as text: a number there never matches
# (math_dapo raises on it), so a dataset of numeric answers is refused before training.
_TEXT_ANSWERS = (gsm8k_rule.gsm8k, math_rule.math_reward, dapo_rule.math_dapo)

# verl's data sources whose scorers rl does not have, and the scorer verl uses for them
_VERL_ONLY = {
    **dict.fromkeys(
        (
            "numina_aops_forum",
            "numina_synthetic_math",
            "numina_amc_aime",
            "numina_synthetic_amc",
            "numina_cn_k12",
            "numina_olympiads",
        ),
        "prime_math",
    ),
    **dict.fromkeys(
        (
            "searchR1_nq",
            "searchR1_triviaqa",
            "searchR1_popqa",
            "searchR1_hotpotqa",
            "searchR1_2wikimultihopqa",
            "searchR1_musique",
            "searchR1_bamboogle",
        ),
        "search_r1_like_qa_em",
    ),
}


def scorer_for(data_source: str) -> Scorer | None:
    """The rule-based scorer of `data_source`, or None when rl has none."""
    scorer = SCORERS.get(data_source)
    if scorer is not None:
        return scorer
    for prefix, prefixed in PREFIXED.items():
        if data_source.startswith(prefix):
            return prefixed
    return None


def known_data_sources() -> str:
    """The data sources with a scorer, for error messages: `aime*` stands for every name
    starting with `aime`."""
    return ", ".join(sorted([*SCORERS, *(f"{prefix}*" for prefix in PREFIXED)]))


def compares_text(data_source: str) -> bool:
    """True when the scorer compares the ground truth as a string (verl's GSM8K, MATH and
    DAPO rules): then a numeric ground truth can never score."""
    return scorer_for(data_source) in _TEXT_ANSWERS


def unscored_reason(data_source: str) -> str:
    """Why `data_source` has no rule-based reward: ' (verl scores it with ...)' for verl's
    data sources whose scorer rl does not implement, else ''."""
    verl_scorer = _VERL_ONLY.get(data_source)
    if verl_scorer is None:
        return ""
    return f" (verl scores it with its {verl_scorer} scorer, which rl does not implement)"


def default_compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None
) -> float | dict[str, Any]:
    """The rule-based score of one response, chosen by `data_source`: a float, or the dict a
    scorer answers with (math_dapo's {"score", "acc", "pred"}), read as a custom function's."""
    scorer = scorer_for(data_source)
    if scorer is None:
        raise ConfigError(
            f"no rule-based reward for data_source {data_source!r}"
            f"{unscored_reason(data_source)} (known: {known_data_sources()}); set "
            "reward.custom_reward_function.path"
        )
    result = scorer(solution_str, ground_truth)
    return result if isinstance(result, dict) else float(result)


def load_custom_reward(
    path: str, name: str = "compute_score", reward_kwargs: Mapping[str, Any] | None = None
) -> ScoreFn:
    """`name` from the Python file `path` (or `pkg://module`): compute_score(data_source, solution_str,
    ground_truth, extra_info=None, **reward_kwargs) -> float | {"score": float, ...}.

    Called as verl calls it: every argument by keyword, `reward_kwargs`
    (`reward.custom_reward_function.reward_kwargs`) merged in, so a function whose parameters
    come in another order, or that takes options of its own, scores as it did in verl.

    Everything the user can get wrong here (no file, not Python, an import that fails, no such
    function, a signature that cannot take the four arguments) is a `ConfigError` at start-up,
    not a failure on every response mid-run.
    """
    file = python_file(path)
    if not file.is_file():
        raise ConfigError(
            f"reward.custom_reward_function.path = {path!r} does not exist; point it at a .py "
            "file (or pkg://an.installed.module)"
        )
    module = load_user_file(
        file, f"rl_custom_reward_{file.stem}", "reward.custom_reward_function.path"
    )
    fn = getattr(module, name, None)
    if not callable(fn):
        found = sorted(
            n
            for n, v in vars(module).items()
            if callable(v) and not n.startswith("_") and not inspect.isclass(v)
        )
        raise ConfigError(
            f"{file} has no function {name!r} (reward.custom_reward_function.name); "
            f"functions found: {', '.join(found) or 'none'}"
        )
    options = dict(reward_kwargs or {})
    _check_signature(file, name, fn, options)
    if inspect.iscoroutinefunction(fn):  # verl awaits an async compute_score
        return AsyncScore(fn, options)
    return functools.partial(fn, **options) if options else fn


def _check_signature(file: Path, name: str, fn: ScoreFn, options: dict[str, Any]) -> None:
    """Fail now if `fn` cannot take the four keyword arguments every call passes, and the
    reward_kwargs."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or C callable: its call will tell
        return
    try:
        signature.bind(**SCORE_ARGUMENTS, **options)
    except TypeError as error:
        given = "".join(f", {key}=..." for key in options)
        served = set(options) & {"reward_router_address", "reward_model_tokenizer"}
        user = set(options) - served
        raise ConfigError(
            f"{file}: {name}{signature} cannot be called as "
            f"{name}(data_source=..., solution_str=..., ground_truth=..., extra_info=...{given}) "
            f"({error}); give it those parameters (extra_info may default to None)"
            + (", or change reward.custom_reward_function.reward_kwargs" if user else "")
            + (
                "; a served reward model's function takes reward_router_address and "
                "reward_model_tokenizer, as in verl's reward loop"
                if served
                else ""
            )
        ) from None
