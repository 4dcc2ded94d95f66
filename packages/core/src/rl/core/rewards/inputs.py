"""Before training: can the configured reward score these datasets at all?

Rule-based scoring (no `reward.custom_reward_function.path`, no `reward.reward_model.path`)
picks a scorer by each row's data_source and compares with its ground truth, so every
data_source must have a scorer (`scorer_for`) and every row needs an answer; verl's scorers
compare answers as text, so for them a numeric answer (which would never score) is refused
too. With `reward.domains`, every row's domain must be one of them (`DomainRouting.check`); each
domain's scorer reads its rows itself. A custom function or a reward model decides for itself (a format or length reward needs
no ground truth; any data_source may mean something to it), so then nothing is checked here:
its failures are counted while scoring.
"""

from __future__ import annotations

from typing import Any

from rl.core.data.prompts import answer_of
from rl.core.data.reader import SourcedRow
from rl.core.errors import ConfigError, DataError
from rl.core.rewards.registry import (
    compares_text,
    known_data_sources,
    scorer_for,
    unscored_reason,
)

_OR_CUSTOM = "or set reward.custom_reward_function.path"


def check_reward_inputs(config: Any, train: Any, val: Any) -> None:
    """Raise ConfigError for a data_source with no rule-based scorer and DataError for a row
    with no answer (or a non-text answer for a scorer that compares text), naming the file,
    row, key and what there is instead.

    `train` and `val` are `PromptDataset`s; their columns are the ones they were built with
    (`data.data_source_key`, `data.answer_key`).
    """
    reward = config.reward
    if reward.domains:  # each row's domain must be configured; its scorer checks the row
        from rl.core.rewards.domains import DomainRouting

        routing = DomainRouting(config)
        for dataset in (train, val):
            routing.check(dataset)
            if not reward.custom_reward_function.path:
                _check_domain_data_sources(routing, dataset)
                _check_domain_rows(routing, dataset)
        return
    if reward.custom_reward_function.path or reward.reward_model.path:
        return
    if config.rollout.multi_turn.enable and config.rollout.multi_turn.environment:
        return  # the environment scores the episodes
    for dataset in (train, val):
        _check_data_sources(dataset)
    for dataset in (train, val):
        _check_answers(dataset)
    for dataset in (train, val):
        _check_answer_types(dataset)


def _check_domain_data_sources(routing: Any, dataset: Any) -> None:
    """A domain scored by data_source: each of its rows' data_source needs a rule."""
    for item, (source, row) in zip(dataset.items, dataset.origins, strict=True):
        domain = routing.domain_of(item)
        if routing.domains[domain].scorer != "data_source" or scorer_for(item.data_source):
            continue
        raise ConfigError(
            f"{source}, row {row}: domain {domain!r} is scored by data_source "
            f"(reward.domains.{domain}.scorer), and {item.data_source!r} has no rule-based "
            f"reward{unscored_reason(item.data_source)}; known: {known_data_sources()}. Name "
            f"the domain's scorer, {_OR_CUSTOM}"
        )


def _check_domain_rows(routing: Any, dataset: Any) -> None:
    """A rule scorer that reads more of a row than its answer (the code sandbox's test
    cases) checks each of its rows here, before the first step."""
    from rl.core.rewards.domain_score import row_check

    for item, (source, row) in zip(dataset.items, dataset.origins, strict=True):
        domain = routing.domain_of(item)
        scorer = routing.domains[domain].scorer
        check = row_check(scorer)
        if check is None:
            continue
        try:
            check(item.ground_truth, item.extra_info)
        except ValueError as error:
            raise DataError(
                f"{source}, row {row}: domain {domain!r} is scored by {scorer} "
                f"(reward.domains.{domain}.scorer), which cannot read this row: {error}"
            ) from None


def _check_data_sources(dataset: Any) -> None:
    key, known = dataset.options.data_source_key, known_data_sources()
    for value, row in dataset.rows_by_data_source.items():
        if scorer_for(value) is not None:
            continue
        if key not in row.data:
            raise ConfigError(
                f"{row.source}, row {row.index}: no data_source column {key!r} "
                f"(data.data_source_key) to choose the rule-based reward by; columns are "
                f"{sorted(row.data)}; known data_source values: {known}. Fix the column or "
                f"data.data_source_key, {_OR_CUSTOM}"
            )
        raise ConfigError(
            f"{row.source}, row {row.index}: data_source {value!r} (column {key!r}, "
            f"data.data_source_key) has no rule-based reward{unscored_reason(value)}; known: "
            f"{known}. Fix the column "
            f"or data.data_source_key, {_OR_CUSTOM}"
        )


def _check_answers(dataset: Any) -> None:
    key = dataset.options.answer_key
    row: SourcedRow | None = dataset.first_row_without_answer
    if row is None:
        return
    where = _missing_place(row.data, key)
    what = (
        f"the answer column {key!r} (data.answer_key) is empty (null)"
        if where is None
        else f"no answer column {key!r} (data.answer_key); {where}"
    )
    source = row.data.get(dataset.options.data_source_key, "unknown")
    raise DataError(
        f"{row.source}, row {row.index}: {what} ({dataset.num_without_answer} of "
        f"{len(dataset)} rows lack it). The rule-based reward for data_source {source!r} needs "
        "the ground truth: set data.answer_key to the right column (dotted for a nested one, "
        f"e.g. reward_model.ground_truth), {_OR_CUSTOM}"
    )


def _check_answer_types(dataset: Any) -> None:
    """The first row of each data_source whose scorer compares text must hold text."""
    key = dataset.options.answer_key
    for value, row in dataset.rows_by_data_source.items():
        answer = answer_of(row, dataset.options)
        if not compares_text(value) or answer is None or isinstance(answer, str):
            continue
        raise DataError(
            f"{row.source}, row {row.index}: the answer {answer!r} (column {key!r}, "
            f"data.answer_key) is of type {type(answer).__name__}, but the rule-based reward for "
            f"data_source {value!r} compares answers as text, as verl's does: no response "
            f"would ever score. Write the answers as strings (e.g. {str(answer)!r}), use "
            f"data_source 'gsm8k_lenient' or 'math_verify', {_OR_CUSTOM}"
        )


def _missing_place(data: dict[str, Any], dotted: str) -> str | None:
    """What there is where `dotted` stops resolving; None when it resolves (to null)."""
    value: Any = data
    parents: list[str] = []
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            if not parents:
                return f"columns are {sorted(value)}"
            keys = sorted(value) if isinstance(value, dict) else []
            name = ".".join(parents)
            return f"{name!r} has keys {keys}" if keys else f"{name!r} is not a mapping"
        parents.append(part)
        value = value[part]
    return None
