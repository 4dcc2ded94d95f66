"""Reward routing by domain: which domain a row belongs to, and scoring a batch whose rows
belong to several, each by its own scorer (ROLL's per-domain reward workers).

`DomainRouting` names each row's domain (`rl.core.config.domains` has the rule) and
refuses at load a row whose domain is not configured, naming its file and row and the
domains there are. Without `reward.domains` the route of a row is its data_source (verl's
`data_source`, ROLL's `tag`), which only groups the metrics.

`DomainRewards` scores each domain's rows with its scorer: a rule scorer through a
`RewardManager` of its own (its timeout, process pool and error counting), a judge model
through `rl.core.rewards.judge`; the results come back in the batch's order, with
`reward/<domain>/time_s` for each domain scored.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from rl.core.errors import ConfigError
from rl.core.rewards.domain_score import DATA_SOURCE, JUDGE, check_scorer
from rl.core.rewards.manager import RewardManager
from rl.core.rewards.types import RewardRequest, RewardResult

DOMAIN_SCORE = "pkg://rl.core.rewards.domain_score"
# what every scorer reports, summed or maxed over the domains
_SHARED = ("reward/mean", "reward/errors", "reward/timeouts", "reward/error_rate")


class DomainRouting:
    """Each prompt's domain from `data.domain_key`, the tags of `reward.domains`, and
    `data.default_domain`; with no domains configured, its data_source."""

    def __init__(self, config: Any) -> None:
        self.domains = dict(config.reward.domains)
        self.domain_key = config.data.domain_key
        self.default = config.data.default_domain
        self.by_tag: dict[str, str] = {}
        for name, domain in self.domains.items():
            for tag in domain.tag_included:
                other = self.by_tag.setdefault(str(tag), name)
                if other != name:
                    raise ConfigError(
                        f"reward.domains.{name}.tag_included: tag {tag!r} is also in "
                        f"reward.domains.{other}.tag_included; a tag routes to one domain"
                    )
        if self.default is not None and self.domains and self.default not in self.domains:
            raise ConfigError(
                f"data.default_domain = {self.default!r} is not a domain of reward.domains "
                f"({sorted(self.domains)})"
            )

    @property
    def enabled(self) -> bool:
        return bool(self.domains)

    def domain_of(self, item: Any) -> str:
        """The item's domain ('' when none applies: see `check`)."""
        if not self.domains:
            return str(item.data_source)
        named = item.extra.get(self.domain_key)
        if named is not None:
            return str(named)
        return self.by_tag.get(str(item.data_source), self.default or "")

    def check(self, dataset: Any) -> None:
        """Refuse the first prompt of `dataset` (a `PromptDataset`) whose domain is not
        configured, naming its file and row."""
        if not self.domains:
            return
        for item, (source, row) in zip(dataset.items, dataset.origins, strict=True):
            domain = self.domain_of(item)
            if domain in self.domains:
                continue
            how = (
                f"its {self.domain_key!r} column says {domain!r}"
                if domain
                else f"its tag {item.data_source!r} is in no reward.domains.<d>.tag_included "
                "and data.default_domain is not set"
            )
            raise ConfigError(
                f"{source}, row {row}: {how}; the domains configured are "
                f"{sorted(self.domains)} (reward.domains), with tags {sorted(self.by_tag)}"
            )


def domain_metrics(
    domains: Sequence[str], scores: Sequence[float], rows: Sequence[Mapping[str, float]]
) -> dict[str, float]:
    """Per domain: `reward/<d>/mean` (score), `reward/<d>/accuracy` (the scorer's acc, else
    the share of positive scores) and `reward/<d>/count` (responses)."""
    grouped: dict[str, list[int]] = defaultdict(list)
    for index, domain in enumerate(domains):
        grouped[domain].append(index)
    metrics = {}
    for domain, indices in sorted(grouped.items()):
        values = [scores[i] for i in indices]
        correct = [
            float(rows[i]["acc"]) if "acc" in rows[i] else float(scores[i] > 0) for i in indices
        ]
        metrics[f"reward/{domain}/mean"] = sum(values) / len(values)
        metrics[f"reward/{domain}/accuracy"] = sum(correct) / len(correct)
        metrics[f"reward/{domain}/count"] = float(len(values))
    return metrics


class DomainRewards:
    """`score(requests)` with each request scored by its domain's scorer (`request.domain`)."""

    def __init__(self, config: Any, judges: Mapping[str, Any] | None = None) -> None:
        reward = config.reward
        self.scorers: dict[str, Any] = {}
        for name, domain in reward.domains.items():
            check_scorer(name, domain.scorer, domain.options)
            if domain.scorer == JUDGE:
                if judges is None or name not in judges:
                    raise ConfigError(f"reward.domains.{name}: the llm_judge scorer has no judge")
                self.scorers[name] = judges[name]
                continue
            custom = reward.custom_reward_function
            if domain.scorer == DATA_SOURCE and custom.path:
                path, function, options = custom.path, custom.name, dict(custom.reward_kwargs)
            else:
                path, function = DOMAIN_SCORE, "compute_score"
                options = {"scorer": domain.scorer, **domain.options}
            self.scorers[name] = RewardManager(
                path,
                function,
                options,
                num_workers=reward.num_workers,
                timeout_s=domain.timeout_s or reward.timeout_s,
                reward_scale=reward.reward_scale,
                max_error_rate=reward.max_error_rate,
                error_rate_window=reward.error_rate_window,
            )

    def score(self, requests: Sequence[RewardRequest]) -> RewardResult:
        """Each request by its domain's scorer; a scorer's `extra_info` also holds the
        rendered prompt (`prompt_str`) and the row's data_source as its `tag` (ROLL's
        workers read both; a row's own `tag` column wins)."""
        requests = [
            replace(
                r,
                extra_info={
                    "tag": r.data_source,
                    **(r.extra_info or {}),
                    "prompt_str": r.prompt_str,
                },
            )
            for r in requests
        ]
        grouped: dict[str, list[int]] = defaultdict(list)
        for index, request in enumerate(requests):
            grouped[request.domain].append(index)
        scores = [0.0] * len(requests)
        errors = [""] * len(requests)
        extras: list[dict[str, float]] = [{} for _ in requests]
        counts: dict[str, float] = defaultdict(float)
        metrics: dict[str, float] = {}
        for domain, indices in grouped.items():
            if domain not in self.scorers:
                raise ConfigError(
                    f"a response of domain {domain!r} has no scorer (reward.domains: "
                    f"{sorted(self.scorers)})"
                )
            started = time.perf_counter()
            result = self.scorers[domain].score([requests[i] for i in indices])
            metrics[f"reward/{domain}/time_s"] = time.perf_counter() - started
            for position, index in enumerate(indices):
                scores[index] = result.scores[position]
                errors[index] = result.errors[position] if result.errors else ""
                if result.extras:
                    extras[index] = result.extras[position]
            for key in ("reward/errors", "reward/timeouts"):
                counts[key] += result.metrics.get(key, 0.0)
            for key, value in result.metrics.items():  # a scorer's own (judge_unparsed)
                if key not in _SHARED:
                    metrics[f"reward/{domain}/{key.removeprefix('reward/')}"] = value
            metrics[f"reward/{domain}/error_rate"] = result.metrics.get("reward/error_rate", 0.0)
        metrics.update(counts)
        metrics["reward/mean"] = sum(scores) / max(len(scores), 1)
        metrics["reward/error_rate"] = max(
            (v for k, v in metrics.items() if k.endswith("/error_rate")), default=0.0
        )
        return RewardResult(scores, metrics, errors, extras)

    def close(self) -> None:
        for scorer in self.scorers.values():
            close = getattr(scorer, "close", None)
            if close is not None:
                close()
