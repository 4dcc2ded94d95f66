"""A configuration that cannot learn, warned about before any model loads.

Greedy sampling (`rollout.temperature = 0`, what verl's `do_sample: false` maps to, or
`rollout.top_k = 1`) gives the `rollout.n` responses to a prompt the same tokens, so a
group estimator (advantages relative to the other responses: grpo and Dr.GRPO, rloo,
reinforce_plus_plus_baseline) sees equal rewards in every group and every advantage is 0.
It is a warning, not a refusal: a deterministic engine is the user's to choose.
"""

from __future__ import annotations

import logging

from rl.core.algorithms import GROUP_ESTIMATORS
from rl.core.config import Config

log = logging.getLogger(__name__)


def greedy_group_warning(config: Config) -> str | None:
    """The warning for `config`, or None when its sampling can differ within a group."""
    rollout, estimator = config.rollout, config.algorithm.adv_estimator
    if rollout.n < 2 or estimator not in GROUP_ESTIMATORS:
        return None
    if rollout.temperature == 0:
        greedy = "rollout.temperature = 0 (greedy; do_sample: false)"
    elif rollout.top_k == 1:
        greedy = "rollout.top_k = 1 (greedy)"
    else:
        return None
    return (
        f"{greedy} with rollout.n = {rollout.n} under algorithm.adv_estimator = {estimator}: "
        "the responses to a prompt are identical, so every group's advantages are 0 and "
        "nothing is learned; set rollout.temperature > 0 (e.g. 1.0) and rollout.top_k = -1"
    )


def warn_greedy_groups(config: Config) -> None:
    """Log `greedy_group_warning(config)` if there is one."""
    warning = greedy_group_warning(config)
    if warning:
        log.warning(warning)
