"""Case instructions of ROLL's ifeval data: all upper case, all lower case, a number of
capitalised words."""

from __future__ import annotations

import re

_CAPITAL_WORD = re.compile(r"\b[A-Z]+\b")


def is_uppercase(text: str) -> bool:
    """Upper-casing changes nothing."""
    return text == text.upper()


def is_lowercase(text: str) -> bool:
    """Lower-casing changes nothing."""
    return text == text.lower()


def capital_word_count(text: str, count: int, quantifier: str) -> bool:
    """Words of ASCII capitals only "at least" / "at most" `count`, or "around" it (here:
    exactly); another quantifier: not followed."""
    words = len(_CAPITAL_WORD.findall(text))
    if quantifier == "at least":
        return words >= count
    if quantifier == "around":
        return words == count
    if quantifier == "at most":
        return words <= count
    return False
