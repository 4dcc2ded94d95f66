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

from rl.core.config.judge import JudgeConfig
from rl.core.config.rules import (
    NOT_EMPTY,
    POSITIVE,
    Checked,
    check_fields,
    optional,
    require,
    setting,
)


@dataclass(frozen=True)
class DomainRewardConfig(Checked):
    """One domain's scorer (ROLL's `worker_cls`: see `rl.core.rewards.domain_score` for the
    names) and the tags routed to it (ROLL's `tag_included`); `options` are the scorer's own
    settings (ROLL's worker fields, e.g. `reward_type`), checked against it at load."""

    scorer: str = setting("data_source", NOT_EMPTY)
    tag_included: tuple[str, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)
    # a row's scoring time limit in seconds (a judge's: per batch of judge.batch_size
    # prompts); null: reward.timeout_s for a rule, 600 s for a judge
    timeout_s: float | None = setting(None, optional(POSITIVE))
    judge: JudgeConfig = field(default_factory=JudgeConfig)  # the llm_judge scorer's model

    def __post_init__(self) -> None:
        check_fields(self)
        judged = self.scorer == "llm_judge"
        require(
            not judged or self.judge.model_path is not None,
            "judge.model_path",
            self.judge.model_path,
            "the judge model's folder: the llm_judge scorer generates with it",
        )
        require(
            judged or self.judge.model_path is None,
            "judge.model_path",
            self.judge.model_path,
            f"null: only the llm_judge scorer has a judge model (scorer is {self.scorer!r})",
        )
