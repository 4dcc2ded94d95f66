"""GSM8K's `#### <answer>` rule, scoring exactly as verl's `openai/gsm8k` scorer does.

Only the last 300 characters of a response are read. In the strict method (verl's default)
the answer is the last `#### ` (one space) followed by digits, `.`, `,` and an optional
leading `-`; commas are dropped and the rest is compared with the ground truth as text:
`####42`, `#### $42`, `#### 42.`, `#### 42.0` and `#### 042` all miss `"42"`, and a ground
truth that is not a string (the int 42) never matches. The flexible method takes the last such
run of characters anywhere (commas kept). Lenient matching is `rule_based.gsm8k_lenient`.
"""

from __future__ import annotations

import re
from typing import Any

WINDOW = 300  # characters read from the end of the response
# ASCII digits only: `\d` would also take other scripts' digits, which verl's rule does not.
_STRICT = re.compile(r"#### (-?[0-9.,]+)")
_FLEXIBLE = re.compile(r"-?[0-9.,]+")


def extract_gsm8k_answer(solution: str, method: str = "strict") -> str | None:
    """The answer text of `solution` under `method` ("strict" or "flexible"), or None."""
    if method not in ("strict", "flexible"):
        raise ValueError(f"method must be 'strict' or 'flexible', got {method!r}")
    tail = solution[-WINDOW:]
    if method == "strict":
        marked = _STRICT.findall(tail)
        return marked[-1].replace(",", "") if marked else None
    runs = _FLEXIBLE.findall(tail)
    meaningful = [run for run in runs if run != "."]
    if meaningful:
        return meaningful[-1]
    # Only lone dots: verl's scan ends on the first of them and answers with it.
    return runs[0] if runs else None


def gsm8k(
    solution: str,
    ground_truth: Any,
    method: str = "strict",
    format_score: float = 0.0,
    score: float = 1.0,
) -> float:
    """`score` when the extracted answer equals `ground_truth` (as text), `format_score` when
    an answer was found but differs, 0.0 when none was found."""
    answer = extract_gsm8k_answer(solution, method)
    if answer is None:
        return 0.0
    return float(score if answer == ground_truth else format_score)
