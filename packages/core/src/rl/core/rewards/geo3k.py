"""verl's geometry3k reward (`data_source: hiyouga/geometry3k`, its VL GRPO example).

A response scores 0.9 x accuracy + 0.1 x format: accuracy is 1 when the content of its
last `\\boxed{}` grades equal to the ground truth by mathruler's grader (the one verl
calls: normalised LaTeX, then sympy), format is 1 when the whole response is a
`<think>...</think>` block followed by a `\\boxed{}` answer. mathruler comes with
`pip install 'rl-core[vision]'`.
"""

from __future__ import annotations

import re

from rl.core.imports import require

FORMAT = re.compile(r"<think>.*</think>.*\\boxed\{.*\}.*", re.DOTALL)
FORMAT_WEIGHT = 0.1


def geo3k(solution_str: str, ground_truth: str) -> float:
    """verl's geo3k score of one response: in {0, 0.1, 0.9, 1.0}."""
    grader = require("mathruler.grader", "rl-core[vision]")
    answer = grader.extract_boxed_content(solution_str)
    accurate = 1.0 if grader.grade_answer(answer, str(ground_truth)) else 0.0
    formatted = 1.0 if FORMAT.fullmatch(solution_str) else 0.0
    return (1.0 - FORMAT_WEIGHT) * accurate + FORMAT_WEIGHT * formatted
