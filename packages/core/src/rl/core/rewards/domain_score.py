"""The scorers a reward domain can name (`reward.domains.<d>.scorer`), and the one entry a
scoring pool calls for every rule-scored domain.

Rule scorers are module-level functions `fn(solution_str, ground_truth, extra_info,
**options) -> {"score": ..., "acc": ..., ...}` (ROLL's reward workers, as ROLL computes
them); `data_source` scores a row by its data_source as rl does without domains (verl's
rules); `llm_judge` is a model served by rl's own engine (`rl.core.rewards.judge`), not a
function, so it has no entry here.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from rl.core.errors import ConfigError

# scorer name -> "module:function" (imported when first used: pool workers import this)
RULE_SCORERS = {
    "math_rule": "rl.core.rewards.roll_math:math_rule",
    "ifeval": "rl.core.rewards.ifeval:ifeval",
    "crossthinkqa": "rl.core.rewards.crossthinkqa:crossthinkqa",
    "code_sandbox": "rl.core.rewards.code_sandbox:code_sandbox",
}
DATA_SOURCE = "data_source"
JUDGE = "llm_judge"
SCORER_NAMES = (*RULE_SCORERS, DATA_SOURCE, JUDGE)


def rule_scorer(name: str) -> Callable[..., Any]:
    module, function = RULE_SCORERS[name].split(":")
    scorer: Callable[..., Any] = getattr(importlib.import_module(module), function)
    return scorer


def check_scorer(domain: str, name: str, options: Mapping[str, Any]) -> None:
    """Refuse at load a scorer rl does not have, or options it does not take, naming the
    domain's key."""
    key = f"reward.domains.{domain}"
    if name not in SCORER_NAMES:
        raise ConfigError(
            f"{key}.scorer = {name!r}: no such scorer; choose one of {list(SCORER_NAMES)}"
        )
    if name in (DATA_SOURCE, JUDGE):
        if options:
            raise ConfigError(
                f"{key}.options = {dict(options)}: the {name} scorer takes no options "
                + ("(its settings are reward.domains.<d>.judge.*)" if name == JUDGE else "")
            )
        return
    accepted = [
        p.name
        for p in inspect.signature(rule_scorer(name)).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    ]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ConfigError(
            f"{key}.options: the {name} scorer has no option {', '.join(unknown)}; its "
            f"options are {accepted or 'none'}"
        )
    # a scorer whose options can be wrong in value checks them here, not on every row
    module = importlib.import_module(RULE_SCORERS[name].split(":")[0])
    check_options = getattr(module, "check_options", None)
    if check_options is not None:
        try:
            check_options(**options)
        except ValueError as error:
            raise ConfigError(f"{key}.options: {error}") from None


def row_check(name: str) -> Callable[[Any, Any], None] | None:
    """The rule scorer's `check_row(ground_truth, extra_info)` (ValueError for a row it
    cannot score), when its module has one."""
    if name not in RULE_SCORERS:
        return None
    module = importlib.import_module(RULE_SCORERS[name].split(":")[0])
    return getattr(module, "check_row", None)


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    *,
    scorer: str,
    **options: Any,
) -> Any:
    """One response's score by the domain's `scorer` (what a scoring pool runs: loaded as
    `pkg://rl.core.rewards.domain_score`, the scorer and its options bound as reward
    kwargs)."""
    if scorer == DATA_SOURCE:
        from rl.core.rewards.registry import default_compute_score

        return default_compute_score(data_source, solution_str, ground_truth, extra_info)
    return rule_scorer(scorer)(solution_str, ground_truth, dict(extra_info or {}), **options)
