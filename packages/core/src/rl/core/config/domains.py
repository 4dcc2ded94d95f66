"""`reward.domains`: several scorers in one run, each row routed to one by its domain
(ROLL's `rewards.<domain>` reward workers).

A row's domain is its `data.domain_key` column (ROLL's `domain`) when it has one, else the
domain whose `tag_included` lists the row's tag (its `data.data_source_key` column: ROLL's
`tag`, verl's `data_source`), else `data.default_domain` (ROLL's fallback is `math_rule`);
a row left without a configured domain is refused at load (`rl.core.rewards.domains`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rl.core.config.rules import NOT_EMPTY, POSITIVE, Checked, optional, setting


@dataclass(frozen=True)
class DomainRewardConfig(Checked):
    """One domain's scorer (ROLL's `worker_cls`: see `rl.core.rewards.domain_score` for the
    names) and the tags routed to it (ROLL's `tag_included`); `options` are the scorer's own
    settings (ROLL's worker fields, e.g. `reward_type`), checked against it at load."""

    scorer: str = setting("data_source", NOT_EMPTY)
    tag_included: tuple[str, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)
    # a row's scoring time limit in seconds (rule scorers); null: reward.timeout_s
    timeout_s: float | None = setting(None, optional(POSITIVE))
