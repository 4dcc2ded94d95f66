"""The DAPO rule: the response's last `Answer: ...` line, normalised as in Minerva's MATH
evaluation, equals the normalised ground truth. Scores exactly as verl's scorer of
`math_dapo`, `math`, `math_dapo_reasoning` and every data source starting with `aime`.

Only the last 300 characters of a response are read. The result is a dict: `score` +1.0 or
-1.0, `acc` (bool, the reward manager's `reward/acc` metric) and `pred` (the answer as
compared). Without an `Answer:` line the last `\\boxed{...}` in the last 100 characters is
compared with the ground truth exactly, unnormalised (verl 0.9; verl 0.6 and 0.7 have no such
fallback: `box_fallback=False`). `strict_box_verify=True` scores the box alone, as verl's
option of that name does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from rl.core.rewards.boxed import last_command_span

WINDOW = 300  # characters of the response read
BOX_WINDOW = 100  # characters read for the boxed answer
INVALID = "[INVALID]"  # the prediction when there is no `Answer:` line
_ANSWER_LINE = re.compile(r"answer\s*:\s*([^\n]+)", re.IGNORECASE)

# Applied in this order; `a ` and `an ` go anywhere they occur, as in Minerva's normaliser.
_REPLACED = (
    ("an ", ""),
    ("a ", ""),
    (".$", "$"),
    ("\\$", ""),
    ("\\ ", ""),
    (" ", ""),
    ("mbox", "text"),
    (",\\text{and}", ","),
    ("\\text{and}", ","),
    ("\\text{m}", "\\text{}"),
)
_REMOVED = (
    "square",
    "ways",
    "integers",
    "dollars",
    "mph",
    "inches",
    "hours",
    "km",
    "units",
    "\\ldots",
    "sue",
    "points",
    "feet",
    "minutes",
    "digits",
    "cents",
    "degrees",
    "cm",
    "gm",
    "pounds",
    "meters",
    "meals",
    "edges",
    "students",
    "childrentickets",
    "multiples",
    "\\text{s}",
    "\\text{.}",
    "\\text{\ns}",
    "\\text{}^2",
    "\\text{}^3",
    "\\text{\n}",
    "\\text{}",
    "\\mathrm{th}",
    "^\\circ",
    "^{\\circ}",
    "\\;",
    ",\\!",
    "{,}",
    '"',
    "\\dots",
)
_UNWRAPPED = tuple(
    (re.compile(pattern), r"\1")
    for pattern in (r"\\text\{(.*?)\}", r"\\textbf\{(.*?)\}", r"\\overline\{(.*?)\}")
)
_FIRST_MATH = re.compile(r"(.*?)\$(.*?)\$(.*)")  # a line becomes its first $...$ part
_BOXED = re.compile(r"\\boxed\{(.*)\}")
_FRAC = re.compile(r"frac([^{])(.)")
_SQRT = re.compile(r"sqrt([^{])")


def normalize_final_answer(answer: str) -> str:
    """Minerva's normal form: the part after the last `=`, without spaces, units, `\\text{}`,
    `$`, `\\boxed{}` and thousands separators of plain integers."""
    if not isinstance(answer, str):
        raise TypeError(
            f"the math_dapo rule compares text: ground truth {answer!r} is a "
            f"{type(answer).__name__}, not a string"
        )
    answer = answer.split("=")[-1]
    for old, new in _REPLACED:
        answer = answer.replace(old, new)
    for removed in _REMOVED:
        answer = answer.replace(removed, "")
    answer = _FIRST_MATH.sub(r"$\2$", answer)
    for pattern, replacement in _UNWRAPPED:
        answer = pattern.sub(replacement, answer)
    answer = _BOXED.sub(r"\1", answer)
    answer = _FRAC.sub(r"frac{\1}{\2}", answer)
    answer = _SQRT.sub(r"sqrt{\1}", answer).replace("$", "")
    if answer.replace(",", "").isdigit():
        answer = answer.replace(",", "")
    return answer.strip()


def answer_line_verdict(solution: str, ground_truth: str) -> tuple[bool, str]:
    """(correct, prediction) from the last `Answer: ...` line; prediction `INVALID` if none."""
    lines = _ANSWER_LINE.findall(solution)
    prediction = normalize_final_answer(lines[-1] if lines else INVALID)
    return prediction == normalize_final_answer(ground_truth), prediction


def boxed_verdict(
    solution: str, ground_truth: Any, pause_tokens_index: Sequence[int] | None = None
) -> tuple[bool, str | None]:
    """(correct, boxed text) from the last `\\boxed{...}` in the last 100 characters (or the
    100 before the last pause token), compared with the ground truth as it is."""
    if pause_tokens_index is None:
        tail = solution[-BOX_WINDOW:]
    else:
        if len(pause_tokens_index) != 4:
            raise ValueError(f"pause_tokens_index needs 4 indices, got {len(pause_tokens_index)}")
        tail = solution[pause_tokens_index[-1] - BOX_WINDOW :]
    span = last_command_span(tail, "\\boxed{")
    boxed = None if span is None else span[len("\\boxed{") : -1]
    return boxed == ground_truth, boxed


def math_dapo(
    solution: str,
    ground_truth: Any,
    strict_box_verify: bool = False,
    pause_tokens_index: Sequence[int] | None = None,
    box_fallback: bool = True,
) -> dict[str, Any]:
    """{"score": 1.0 | -1.0, "acc": bool, "pred": str | None} for the response's answer."""
    solution = solution[-WINDOW:]
    if strict_box_verify:
        correct, prediction = boxed_verdict(solution, ground_truth, pause_tokens_index)
    else:
        correct, line_prediction = answer_line_verdict(solution, ground_truth)
        prediction = line_prediction
        if box_fallback and line_prediction == INVALID:
            box_correct, boxed = boxed_verdict(solution, ground_truth, pause_tokens_index)
            if boxed is not None:
                correct, prediction = box_correct, boxed
    return {"score": 1.0 if correct else -1.0, "acc": correct, "pred": prediction}
