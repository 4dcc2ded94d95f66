"""ROLL's per-domain reward workers' query filter (`rewards.<domain>.query_filter_config`)
as rl's dynamic sampling (algorithm.filter_groups)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rl.cli.dialects.mapping import Unsupported

QUERY_FILTER = "read with rewards.<domain>.query_filter_config.type (mapped there)"


def query_filter(flat: Mapping[str, Any]) -> Any:
    """ROLL's query filter (its rollout loop drops a prompt's group by its responses'
    rewards and draws more prompts until the batch is full) as rl's dynamic sampling:
    `std_filter` with `std_threshold` 0 drops the groups whose rewards are all equal
    (algorithm.filter_groups, metric seq_reward); a negative threshold drops none."""
    suffix = ".query_filter_config.type"
    filters = {}
    for key, kind in flat.items():
        if key.startswith("rewards.") and key.endswith(suffix) and kind not in (None, "no_filter"):
            threshold = flat.get(key[: -len("type")] + "filter_args.std_threshold", -1)
            filters[key[: -len(suffix)]] = (kind, threshold)
    if not filters:
        return None
    if any(kind != "std_filter" for kind, _ in filters.values()):
        return Unsupported(
            "ROLL's mean_filter (groups dropped by their mean reward) is not in rl; its "
            "std_filter with filter_args.std_threshold 0 is rl's dynamic sampling"
        )
    domains = set(flat_domains(flat))
    thresholds = {float(threshold) for _, threshold in filters.values()}
    if len(thresholds) > 1 or (len(filters) < len(domains) and max(thresholds) >= 0):
        return Unsupported(
            "the query filter differs by domain: rl has one (algorithm.filter_groups)"
        )
    (threshold,) = thresholds
    if threshold < 0:
        return None  # ROLL's default: no group's std is below it, none is dropped
    if threshold > 0:
        return Unsupported(
            f"std_threshold {threshold} drops groups whose reward std is up to it; rl drops "
            "only the groups whose rewards are all equal (std_threshold: 0)"
        )
    return True


def flat_domains(flat: Mapping[str, Any]) -> list[str]:
    """The reward domains (`rewards.<domain>.*`) of a flattened ROLL config."""
    return sorted(
        {key.split(".")[1] for key in flat if key.startswith("rewards.") and key.count(".") >= 2}
    )


def filter_metric(flat: Mapping[str, Any]) -> Any:
    return "seq_reward" if query_filter(flat) is True else None
