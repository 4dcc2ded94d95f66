"""Content instructions of ROLL's ifeval data: a postscript, placeholders, a choice among
options, the prompt repeated, two different responses."""

from __future__ import annotations

import re
from collections.abc import Iterable

_PLACEHOLDER = re.compile(r"\[(.*?)\]")
RESPONSES_SEPARATOR = "******"


def has_postscript(text: str, postscript_marker: str) -> bool:
    """The marker occurs, and something other than whitespace follows its first occurrence."""
    start = text.find(postscript_marker)
    return start >= 0 and len(text[start:].strip()) > len(postscript_marker)


def placeholder_count(text: str, count: int) -> bool:
    """At least `count` square-bracket placeholders such as `[address]` (on one line)."""
    return len(_PLACEHOLDER.findall(text)) >= count


def is_one_of(text: str, options: Iterable[str]) -> bool:
    """The whole text is contained in one of the options. As in ROLL, options given as one
    string (ROLL's data has e.g. "yes/no/maybe") are its single characters."""
    return any(text in option for option in options)


def repeats_prompt(text: str, original_prompt: str) -> bool:
    """The text starts with the prompt, unchanged."""
    return text.startswith(original_prompt)


def two_different_responses(text: str) -> bool:
    """Exactly one `******` separator, with different texts (stripped) on its two sides."""
    if text.count(RESPONSES_SEPARATOR) != 1:
        return False
    first, second = text.split(RESPONSES_SEPARATOR)
    return first.strip() != second.strip()
