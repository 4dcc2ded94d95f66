"""Finding the `\\boxed{...}` a response ends with, the way verl's MATH scorers scan for it."""

from __future__ import annotations


def closing_brace(text: str, start: int) -> int | None:
    """The index of the `}` at which the braces counted from `start` on first balance.

    Every `{` counts +1 and every `}` -1; the scan stops at a `}` that brings the count to 0.
    A `}` met before any `{` takes the count below 0, so it closes nothing (verl's scan, kept
    for identical scores). None when no `}` balances.
    """
    depth = 0
    for index in range(start, len(text)):
        char = text[index]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index
    return None


def last_command_span(text: str, command: str) -> str | None:
    """From the last `command` (e.g. `\\boxed{`) in `text` through its balancing `}`, or None."""
    start = text.rfind(command)
    if start < 0:
        return None
    end = closing_brace(text, start)
    return None if end is None else text[start : end + 1]
