"""ROLL's CrossThinkQA rule (its CrossThinkQARuleRewardWorker): a multiple-choice answer read
from the response and compared by its letter.

- the answer text is what follows the response's last `</think>` (all of it without one);
- the chosen option is the content of its last `\\boxed{...}` (braces without a `}` inside),
  which also marks the format as followed; without a box, the text after its last
  "answer is" (any case), else the whole answer text;
- the choice is right when the first upper-case character of the chosen option is the
  first character of the ground truth (no upper-case character: wrong).

The reward by `reward_type`, for (right, boxed) / (right, not boxed) / (wrong, boxed) /
(wrong, not boxed): "loose" 1 / 1 / -1 / -1, "soft" 1 / 0.5 / -0.5 / -1, "strict"
1 / -1 / -1 / -1. A repetition penalty (-0.5 times the share of repeated word 3-grams of the
whole response, its thinking included) is added. `acc` is 1 when that rule reward (before
the penalty) is positive.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rl.core.rewards.roll_text import answer_after_think, drop_special_tokens, repetition_penalty

REPETITION_MAX_PENALTY = -0.5
_BOXED_CHOICE = re.compile(r"\\boxed\{([^}]+)\}")
_ANSWER_IS = "answer is"
# (right, boxed) -> reward, per reward_type
REWARDS = {
    "loose": {(True, True): 1.0, (True, False): 1.0, (False, True): -1.0, (False, False): -1.0},
    "soft": {(True, True): 1.0, (True, False): 0.5, (False, True): -0.5, (False, False): -1.0},
    "strict": {(True, True): 1.0, (True, False): -1.0, (False, True): -1.0, (False, False): -1.0},
}


def chosen_option(answer: str) -> tuple[str, bool]:
    """The text holding the chosen option, and whether it came from a `\\boxed{}`."""
    boxes = _BOXED_CHOICE.findall(answer)
    if boxes:
        return boxes[-1], True
    marker = answer.lower().rfind(_ANSWER_IS)
    return (answer if marker < 0 else answer[marker + len(_ANSWER_IS) :]), False


def is_right_choice(option_text: str, ground_truth: str) -> bool:
    """The first upper-case character of `option_text` is the ground truth's first one."""
    letter = next((char for char in option_text if char.isupper()), None)
    return letter is not None and letter == ground_truth[0]


def check_options(
    *, reward_type: str | None = None, response_length_penalty_coef: float = 0.0
) -> None:
    """ValueError for options the rule cannot score with (the router calls it at load)."""
    if reward_type not in REWARDS:
        raise ValueError(
            f"crossthinkqa: reward_type={reward_type!r}; ROLL's CrossThinkQA rule takes one of "
            f"{sorted(REWARDS)} (its examples use 'soft')"
        )
    if response_length_penalty_coef != 0.0:
        raise ValueError(
            f"crossthinkqa: response_length_penalty_coef={response_length_penalty_coef}: ROLL "
            "measures that length on the padded response tensor of the whole batch, which a "
            "per-response scorer does not see; only 0.0 is supported"
        )


def crossthinkqa(
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any],
    *,
    reward_type: str | None = None,
    response_length_penalty_coef: float = 0.0,
) -> dict[str, float]:
    """ROLL's CrossThinkQA reward of one response (see the module's docstring).

    `reward_type` ("loose", "soft" or "strict") has no default in ROLL, which fails without
    one; so does this. ROLL adds `response_length_penalty_coef` times a length reward
    measured on the padded width of the batch's response tensor, not on this response, so
    only its default 0.0 (every ROLL example) is taken.
    """
    check_options(
        reward_type=reward_type, response_length_penalty_coef=response_length_penalty_coef
    )
    if not isinstance(ground_truth, str) or not ground_truth:
        raise ValueError(
            f"crossthinkqa: the ground truth must be the right option's letter as a non-empty "
            f"string (e.g. 'A'), got {ground_truth!r}"
        )
    response = drop_special_tokens(solution_str)
    option_text, boxed = chosen_option(answer_after_think(response))
    right = is_right_choice(option_text, ground_truth)
    assert reward_type is not None  # check_options refused anything but a known type
    rule_reward = REWARDS[reward_type][(right, boxed)]
    penalty = repetition_penalty(response, REPETITION_MAX_PENALTY)
    return {
        "score": rule_reward + penalty,
        "acc": float(rule_reward > 0),
        "format": float(boxed),
        "correct": float(right),
        "repetition_penalty": penalty,
    }
