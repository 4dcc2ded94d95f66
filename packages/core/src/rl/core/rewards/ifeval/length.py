"""Length instructions of ROLL's ifeval data: paragraphs, words and sentences counted."""

from __future__ import annotations

import re

DIVIDER = "* * *"  # the markdown divider between paragraphs
_SENTENCE_BREAK = re.compile(
    r"""(?<!\w\.\w.)       # not after an abbreviation such as "e.g. "
        (?<![A-Z][a-z]\.)  # nor after a title such as "Mr."
        (?<=[.?])          # after a full stop or a question mark
        \s""",
    re.VERBOSE,
)


def divided_paragraph_count(text: str, count: int) -> bool:
    """Exactly `count` paragraphs between `* * *` dividers (lines stripped of surrounding
    whitespace first), none of them empty."""
    cleaned = "\n".join(line.strip() for line in text.splitlines()).strip()
    paragraphs = cleaned.split(DIVIDER)
    return all(part.strip() for part in paragraphs) and len(paragraphs) == count


def word_count(text: str, count: int, quantifier: str) -> bool:
    """Whitespace-separated words "at least" / "at most" `count`, or "around" it (within
    10% of `count` rounded half to even, at least 1); another quantifier: not followed."""
    words = len(text.split())
    if quantifier == "at least":
        return words >= count
    if quantifier == "at most":
        return words <= count
    if quantifier == "around":
        return abs(words - count) <= max(round(count * 0.1), 1)
    return False


def sentence_count(text: str, count: int, quantifier: str) -> bool:
    """Sentences (pieces split at whitespace after "." or "?", abbreviations aside) "at
    least" / "at most" `count`, or "around" it (within 1); another quantifier: not
    followed."""
    sentences = len(_SENTENCE_BREAK.split(text))
    if quantifier == "at least":
        return sentences >= count
    if quantifier == "around":
        return abs(sentences - count) <= 1
    if quantifier == "at most":
        return sentences <= count
    return False


def paragraphs_with_first_word(text: str, count: int, first_word: str, index: int) -> bool:
    """Exactly `count` paragraphs split at blank lines ("\\n\\n"), and paragraph number
    `index` (from 1; Python's indexing, so 0 is the last) starts, once stripped, with
    `first_word`. An `index` past the paragraphs is not followed."""
    paragraphs = text.split("\n\n")
    if len(paragraphs) != count:
        return False
    position = index - 1
    if not -len(paragraphs) <= position < len(paragraphs):
        return False
    return paragraphs[position].strip().startswith(first_word)
