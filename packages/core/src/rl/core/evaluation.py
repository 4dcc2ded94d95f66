"""Offline evaluation of generated responses (`rl eval`, verl's `main_eval` and its
`evaluation.yaml`): a table whose rows hold a prompt, N responses, a data source and the
ground truth is scored response by response, and reported per data source as the mean
score (verl's `test_score/<source>`: the mean over rows of each row's mean) and pass@k.

pass@k is the unbiased estimator of Chen et al. (2021): with n responses of which c are
correct, 1 - C(n - c, k) / C(n, k), averaged over rows; a response is correct when its
score reaches `correct_score`. A scorer that raises counts as a 0 score and an error; more
than `max_error_rate` of the responses erroring ends the evaluation with a `RewardError`
(the first error quoted) rather than reporting those zeros as scores.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rl.core.errors import ConfigError, RewardError

Scorer = Callable[[str, str, Any, Any], Any]


@dataclass(frozen=True)
class EvalColumns:
    """verl's `evaluation.yaml` `data.*` keys: which columns hold what."""

    path: str = ""
    prompt_key: str = "prompt"
    response_key: str = "responses"
    data_source_key: str = "data_source"
    reward_model_key: str = "reward_model"  # a dict with `ground_truth`


@dataclass(frozen=True)
class EvalConfig:
    data: EvalColumns = field(default_factory=EvalColumns)
    custom_reward_function_path: str | None = None
    custom_reward_function_name: str = "compute_score"
    custom_reward_function_kwargs: dict[str, Any] = field(default_factory=dict)
    ks: tuple[int, ...] = (1,)
    correct_score: float = 1.0
    max_error_rate: float = 0.5  # as reward.max_error_rate in training


def pass_at_k(n: int, correct: int, k: int) -> float:
    """The probability that at least one of k responses drawn without replacement from
    n, of which `correct` are correct, is correct."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} responses per prompt, a row has {n}")
    if n - correct < k:
        return 1.0
    return 1.0 - math.comb(n - correct, k) / math.comb(n, k)


def _score(value: Any) -> float:
    """A scorer's answer: a number, or a dict with `score` (verl's custom functions)."""
    if isinstance(value, Mapping):
        value = value["score"]
    return float(value)


def evaluate(
    rows: Sequence[Mapping[str, Any]],
    scorer: Scorer,
    columns: EvalColumns = EvalColumns(),
    ks: Sequence[int] = (1,),
    correct_score: float = 1.0,
    max_error_rate: float = 0.5,
) -> dict[str, float]:
    """Metrics per data source: `test_score/<source>`, `pass@<k>/<source>`, plus
    `eval/rows`, `eval/responses` and `eval/scorer_errors` over the whole table."""
    scores: dict[str, list[float]] = defaultdict(list)
    passes: dict[tuple[str, int], list[float]] = defaultdict(list)
    errors = responses_seen = 0
    first_error = ""
    for index, row in enumerate(rows):
        missing = [
            key
            for key in (columns.response_key, columns.data_source_key, columns.reward_model_key)
            if key not in row
        ]
        if missing:
            raise ConfigError(
                f"row {index} has no column {missing[0]!r} (data.{_which(columns, missing[0])}); "
                f"columns: {', '.join(sorted(row))}"
            )
        responses = row[columns.response_key]
        if isinstance(responses, str):
            responses = [responses]
        source = str(row[columns.data_source_key])
        reward = row[columns.reward_model_key]
        truth = reward.get("ground_truth") if isinstance(reward, Mapping) else reward
        row_scores = []
        for response in responses:
            try:
                row_scores.append(_score(scorer(source, response, truth, row.get("extra_info"))))
            except ConfigError:  # no scorer for this data source: the whole run is wrong
                raise
            except Exception as error:  # a broken response or scorer is a 0, counted
                errors += 1
                first_error = first_error or f"row {index}: {type(error).__name__}: {error}"
                row_scores.append(0.0)
        responses_seen += len(row_scores)
        if not row_scores:
            continue
        scores[source].append(sum(row_scores) / len(row_scores))
        correct = sum(score >= correct_score for score in row_scores)
        for k in ks:
            passes[(source, k)].append(pass_at_k(len(row_scores), correct, k))
    metrics = {f"test_score/{s}": sum(v) / len(v) for s, v in sorted(scores.items())}
    for (source, k), values in sorted(passes.items()):
        metrics[f"pass@{k}/{source}"] = sum(values) / len(values)
    if responses_seen and errors / responses_seen > max_error_rate:
        raise RewardError(
            f"the scorer failed on {errors} of {responses_seen} responses (more than "
            f"max_error_rate = {max_error_rate}); first: {first_error}"
        )
    metrics["eval/rows"] = float(len(rows))
    metrics["eval/responses"] = float(responses_seen)
    metrics["eval/scorer_errors"] = float(errors)
    return metrics


def _which(columns: EvalColumns, key: str) -> str:
    for name in ("response_key", "data_source_key", "reward_model_key"):
        if getattr(columns, name) == key:
            return name
    return "?"


def read_table(path: str | Path) -> list[dict[str, Any]]:
    """The table's rows (parquet, JSON Lines or JSON), read by the trainer's data reader."""
    from rl.core.data.reader import read_rows

    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"data.path = {str(path)!r} does not exist (the generated responses)")
    return [row.data for row in read_rows(str(file))]


def eval_config(values: Mapping[str, Any]) -> EvalConfig:
    """An `EvalConfig` from verl's `evaluation.yaml` layout (`data.*`,
    `custom_reward_function.*`; `ray_kwargs`, or `ray_init` in verl <= 0.4, is verl's
    process setup and is ignored)
    plus ours (`ks`, `correct_score`, `max_error_rate`)."""
    known = {
        "data",
        "custom_reward_function",
        "ray_kwargs",
        "ray_init",  # verl <= 0.4's place of ray_kwargs.ray_init
        "ks",
        "correct_score",
        "max_error_rate",
    }
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(
            f"unknown evaluation key {unknown[0]!r}; known: {', '.join(sorted(known))}"
        )
    data = dict(values.get("data") or {})
    fields = {f for f in EvalColumns.__dataclass_fields__}
    extra = sorted(set(data) - fields - {"use_shm"})
    if extra:
        raise ConfigError(f"unknown key data.{extra[0]}; known: {', '.join(sorted(fields))}")
    custom = dict(values.get("custom_reward_function") or {})
    odd = sorted(set(custom) - {"path", "name", "reward_kwargs"})
    if odd:
        raise ConfigError(
            f"unknown key custom_reward_function.{odd[0]}; known: name, path, reward_kwargs"
        )
    ks = values.get("ks", (1,))
    ks = (ks,) if isinstance(ks, int) else tuple(int(k) for k in ks)
    if not ks or min(ks) < 1:
        raise ConfigError(f"ks = {list(ks)}: each k must be a positive integer")
    return EvalConfig(
        data=EvalColumns(**{k: v for k, v in data.items() if k in fields}),
        custom_reward_function_path=custom.get("path"),
        custom_reward_function_name=custom.get("name") or "compute_score",
        custom_reward_function_kwargs=dict(custom.get("reward_kwargs") or {}),
        ks=ks,
        correct_score=float(values.get("correct_score", 1.0)),
        max_error_rate=float(values.get("max_error_rate", 0.5)),
    )


def run_eval(config: EvalConfig) -> dict[str, float]:
    """Read `config.data.path`, score it with the custom reward function (if set) or the
    rule-based scorer of each row's data source, and return the metrics."""
    from rl.core.rewards import default_compute_score, load_custom_reward

    if not config.data.path:
        raise ConfigError("data.path is not set: the parquet of generated responses")
    scorer: Scorer = default_compute_score
    if config.custom_reward_function_path:
        scorer = load_custom_reward(
            config.custom_reward_function_path,
            config.custom_reward_function_name,
            config.custom_reward_function_kwargs,
        )
    rows = read_table(config.data.path)
    return evaluate(
        rows, scorer, config.data, config.ks, config.correct_score, config.max_error_rate
    )
