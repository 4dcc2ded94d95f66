"""The MATH rule: the last `\\boxed{}` answer, normalised as in the Hendrycks MATH evaluation
(lm-evaluation-harness), equals the normalised ground truth. Scores exactly as verl's scorer
of `lighteval/MATH`, `DigitalLearningGmbH/MATH-lighteval` and `HuggingFaceH4/MATH-500`.

The normal form is textual, not symbolic: `\\dfrac12`, `\\frac{1}{2}`, `1/2` and `0.5` meet,
but `0.50`, `2/4` and `\\frac{2}{4}` do not, nor `3.0` and `3`. Where the normaliser gives up
(two `\\text{ `, a bare `\\sqrt` or `\\frac` at the end) the raw texts are compared. A
response whose last box is not `\\boxed{...}` or `\\boxed ...` (an `\\fbox`, an unclosed
brace) scores 0.
"""

from __future__ import annotations

from typing import Any

from rl.core.rewards.boxed import last_command_span


class _Unnormalizable(Exception):
    """The normaliser cannot read this text; compare the raw texts instead."""


def boxed_answer(solution: str) -> str | None:
    """What the response's last box holds: after `\\boxed ` (up to a `$`) when the text has
    one, else inside the last `\\boxed{...}`; None when there is no readable box."""
    if "\\boxed " in solution:
        return solution.split("\\boxed ")[-1].split("$")[0]
    if "\\boxed" in solution:
        span = last_command_span(solution, "\\boxed")
    else:
        span = last_command_span(solution, "\\fbox")  # found, but never readable below
    if span is None or not span.startswith("\\boxed{"):
        return None
    return span[len("\\boxed{") : -1]


def _drop_units(text: str) -> str:
    """Everything before `\\text{ ` (units written after the value)."""
    if "\\text{ " not in text:
        return text
    parts = text.split("\\text{ ")
    if len(parts) != 2:
        raise _Unnormalizable
    return parts[0]


def _brace_sqrt(text: str) -> str:
    """`\\sqrt3` -> `\\sqrt{3}`."""
    if "\\sqrt" not in text:
        return text
    head, *tails = text.split("\\sqrt")
    for tail in tails:
        if not tail:
            raise _Unnormalizable
        head += "\\sqrt" + (tail if tail[0] == "{" else "{" + tail[0] + "}" + tail[1:])
    return head


def _brace_fracs(text: str) -> str:
    """`\\frac12` -> `\\frac{1}{2}`, `\\frac1{72}` -> `\\frac{1}{72}`; unchanged when a
    `\\frac` is followed by a single character."""
    head, *tails = text.split("\\frac")
    for tail in tails:
        if not tail:
            raise _Unnormalizable
        head += "\\frac"
        if tail[0] == "{":
            head += tail
        elif len(tail) < 2:
            return text
        elif tail[1] == "{":
            head += "{" + tail[0] + "}" + tail[1:]
        else:
            head += "{" + tail[0] + "}{" + tail[1] + "}" + tail[2:]
    return head


def _is_plain_int(text: str) -> bool:
    """True for the text Python writes for an int (`12`, `-3`; not `012`, `+3`, ` 3`)."""
    try:
        return str(int(text)) == text
    except ValueError:
        return False


def _slash_to_frac(text: str) -> str:
    """`3/4` -> `\\frac{3}{4}` when both sides are plain integers."""
    parts = text.split("/")
    if len(parts) == 2 and all(_is_plain_int(part) for part in parts):
        return "\\frac{" + parts[0] + "}{" + parts[1] + "}"
    return text


def normalize_math_answer(text: str) -> str:
    """The Hendrycks MATH normal form of an answer; raises `_Unnormalizable` where it gives up."""
    text = text.replace("\n", "").replace("\\!", "").replace("\\\\", "\\")
    text = text.replace("tfrac", "frac").replace("dfrac", "frac")
    text = text.replace("\\left", "").replace("\\right", "")
    text = text.replace("^{\\circ}", "").replace("^\\circ", "")
    text = _drop_units(text.replace("\\$", ""))
    text = text.replace("\\\\%", "").replace("\\%", "")
    text = text.replace(" .", " 0.").replace("{.", "{0.")
    if not text:
        return text
    if text[0] == ".":
        text = "0" + text
    sides = text.split("=")
    if len(sides) == 2 and len(sides[0]) <= 2:  # `x = 3`, `k=3`: the value
        text = sides[1]
    text = _brace_fracs(_brace_sqrt(text).replace(" ", ""))
    if text == "0.5":
        text = "\\frac{1}{2}"
    return _slash_to_frac(text)


def same_math_answer(answer: str, ground_truth: Any) -> bool:
    """Equal normal forms; the raw texts when either cannot be normalised (or the ground
    truth is not a string: then only an equal object matches)."""
    if ground_truth is None:
        return False
    if not isinstance(ground_truth, str):
        return bool(answer == ground_truth)
    try:
        return normalize_math_answer(answer) == normalize_math_answer(ground_truth)
    except _Unnormalizable:
        return answer == ground_truth


def math_reward(solution: str, ground_truth: Any) -> float:
    """1.0 when the last boxed answer matches the ground truth under the MATH normal form."""
    answer = boxed_answer(solution)
    return float(answer is not None and same_math_answer(answer, ground_truth))
