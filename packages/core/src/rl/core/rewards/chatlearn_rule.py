"""ChatLearn's rule reward (its `RuleReward.select_rule_reward_score_fn`), selected by
`rl ... --from chatlearn` as the run's reward function (`reward.custom_reward_function`).

ChatLearn scores `openai/gsm8k`, `DigitalLearningGmbH/MATH-lighteval`, `aime24` and `aime25`
all with its MATH rule: the last `\\boxed{}` answer, normalised as in the Hendrycks MATH
evaluation, equals the normalised ground truth. That rule is the one rl already has
(`math_rule.math_reward`), but the data sources differ from verl's defaults: verl scores
`openai/gsm8k` by the `#### N` line and `aime*` by DAPO's `Answer:` line, so a ChatLearn
dataset read with rl's defaults would score differently. `hiyouga/geometry3k` (ChatLearn's
geo3k rule, mathruler's grader plus a format score) is not implemented; any other data
source is refused, as ChatLearn raises NotImplementedError for it.
"""

from __future__ import annotations

from typing import Any

from rl.core.errors import ConfigError
from rl.core.rewards.math_rule import math_reward

MATH_SOURCES = ("openai/gsm8k", "DigitalLearningGmbH/MATH-lighteval", "aime24", "aime25")
GEO3K_SOURCE = "hiyouga/geometry3k"


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None
) -> float:
    """ChatLearn's score of one response (0.0 or 1.0)."""
    if data_source in MATH_SOURCES:
        return float(math_reward(solution_str, ground_truth))
    if data_source == GEO3K_SOURCE:
        raise ConfigError(
            f"data_source {data_source!r}: ChatLearn scores it with its geo3k rule (mathruler's "
            "grade_answer and a format score), which rl does not implement"
        )
    raise ConfigError(
        f"data_source {data_source!r}: ChatLearn's rule reward scores only "
        f"{', '.join(MATH_SOURCES)} (and {GEO3K_SOURCE}); rl refuses the others as it does"
    )
