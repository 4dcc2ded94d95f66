"""What a reward function returned -> (score, extra metrics), or why it is not a usable score."""

from __future__ import annotations

import math
from typing import Any

EXPECTED = "expected a number or {'score': number}"


class BadRewardValue(Exception):
    """The result is not a finite score; the message says what was returned."""


def read_reward(result: Any) -> tuple[float, dict[str, float]]:
    """A number, or a dict with a numeric "score" whose other numeric entries become metrics.

    Raises BadRewardValue for anything else, NaN and infinities included: scored as 0 they
    would look like a wrong answer, not like the bug they are.
    """
    if isinstance(result, dict):
        if "score" not in result:
            keys = ", ".join(repr(key) for key in result) or "none"
            raise BadRewardValue(f"returned a dict without 'score' (keys: {keys}), {EXPECTED}")
        value = result["score"]
        shown = "{'score': " + short_repr(value) + "}"
        score = _finite(value, shown, f"the score is a {type(value).__name__}")
        # Non-finite extras are left out so one bad entry does not turn a metric into NaN.
        extras = {
            str(key): float(extra)
            for key, extra in result.items()
            if key != "score" and isinstance(extra, (int, float)) and math.isfinite(extra)
        }
        return score, extras
    return _finite(result, short_repr(result), type(result).__name__), {}


def _finite(value: Any, shown: str, kind: str) -> float:
    number = _as_float(value)
    if number is None:
        raise BadRewardValue(f"returned {shown} ({kind}), {EXPECTED}")
    if not math.isfinite(number):
        raise BadRewardValue(f"returned {shown}")
    return number


def _as_float(value: Any) -> float | None:
    """float(value) for numbers (numpy and 0-d torch ones too); None for strings, None, lists."""
    if isinstance(value, (str, bytes)) or not hasattr(type(value), "__float__"):
        return None
    try:
        return float(value)
    except Exception:  # e.g. a tensor with several elements
        return None


def short_repr(value: Any, limit: int = 60) -> str:
    """repr(value), cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
