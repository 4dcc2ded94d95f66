"""Keyword instructions of ROLL's ifeval data: keywords present, a frequency, forbidden words,
a letter's frequency. Matching ignores case except for the letter."""

from __future__ import annotations

import re
from collections.abc import Iterable

_WORD = re.compile(r"\b\w+\b")


def has_all_keywords(text: str, keyword_list: Iterable[str]) -> bool:
    """Every keyword occurs in the text (as a substring, case-insensitive)."""
    lowered = text.lower()
    return all(keyword.lower() in lowered for keyword in keyword_list)


def keyword_frequency(text: str, word: str, count: int) -> bool:
    """ROLL's `verify_keyword_frequency`, as it computes it: the text has exactly `count`
    words (runs of word characters), whatever `word` is. (Its counting compares each word
    with itself, so every word counts; `word` must still be a string.)"""
    if not isinstance(word, str):
        return False
    return len(_WORD.findall(text.lower())) == count


def has_no_forbidden_words(text: str, forbidden_words: Iterable[str]) -> bool:
    """None of the words occurs in the text (as a substring, case-insensitive)."""
    lowered = text.lower()
    return not any(word.lower() in lowered for word in forbidden_words)


def letter_frequency(text: str, letter: str, count: int) -> bool:
    """The single character `letter` occurs exactly `count` times (case-sensitive); a
    `letter` of another length is never followed."""
    return len(letter) == 1 and text.count(letter) == count
