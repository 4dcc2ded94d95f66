"""Format instructions of ROLL's ifeval data: bullet points, a title, highlighted sections,
sections, JSON."""

from __future__ import annotations

import json
import re

_TITLE = re.compile(r"<<(.*?)>>")
_HIGHLIGHT = re.compile(r"\*(.*?)\*")
BULLET_MARKS = ("*", "-")


def bullet_point_count(text: str, count: int) -> bool:
    """Exactly `count` lines that start, once stripped, with `*` or `-`."""
    bullets = sum(1 for line in text.split("\n") if line.strip().startswith(BULLET_MARKS))
    return bullets == count


def has_title(text: str) -> bool:
    """A title in double angle brackets, such as `<<poem of joy>>` (on one line)."""
    return _TITLE.search(text) is not None


def highlighted_section_count(text: str, count: int) -> bool:
    """At least `count` stretches between single asterisks, such as `*highlighted*` (on one
    line; `**` counts as an empty one)."""
    return len(_HIGHLIGHT.findall(text)) >= count


def section_count(text: str, count: int, section_splitter: str) -> bool:
    """Exactly `count` sections: the pieces between occurrences of the splitter, the piece
    before the first one counted unless it is empty. An empty splitter: not followed."""
    if not section_splitter:
        return False
    sections = text.split(section_splitter)
    if sections[0] == "":
        sections = sections[1:]
    return len(sections) == count


def is_json(text: str) -> bool:
    """The whole text is one JSON value."""
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
