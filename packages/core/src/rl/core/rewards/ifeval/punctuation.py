"""Punctuation instruction of ROLL's ifeval data: no commas."""

from __future__ import annotations


def has_no_commas(text: str) -> bool:
    """No ASCII comma anywhere."""
    return "," not in text
