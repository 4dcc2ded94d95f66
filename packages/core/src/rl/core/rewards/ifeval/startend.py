"""Start/end instructions of ROLL's ifeval data: an exact end phrase, double quotes around
the whole response."""

from __future__ import annotations


def ends_with_phrase(text: str, end_phrase: str) -> bool:
    """The text ends with the phrase exactly (nothing after it, not even whitespace)."""
    return text.endswith(end_phrase)


def is_quoted(text: str) -> bool:
    """The text starts and ends with a double quote (a lone `"` does both)."""
    return text.startswith('"') and text.endswith('"')
