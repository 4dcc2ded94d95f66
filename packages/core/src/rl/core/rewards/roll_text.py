"""The response-text rules ROLL's rule reward workers share (`crossthinkqa` and `ifeval`):
which special tokens are dropped from the decoded response, which part of it is the answer,
and the n-gram repetition penalty added to the reward.
"""

from __future__ import annotations

# ROLL decodes responses with their special tokens, then drops these three (end of text,
# padding, end of turn); a response decoded without special tokens has none of them.
ROLL_DROPPED_TOKENS = ("<|endoftext|>", "<pad>", "<|im_end|>")
END_THINK = "</think>"


def drop_special_tokens(text: str, tokens: tuple[str, ...] = ROLL_DROPPED_TOKENS) -> str:
    """`text` without any occurrence of `tokens`."""
    for token in tokens:
        text = text.replace(token, "")
    return text


def answer_after_think(response: str) -> str:
    """What follows the last `</think>`, with its leading newlines removed (other whitespace
    kept); the whole response when it has no `</think>`."""
    _, marker, answer = response.rpartition(END_THINK)
    return answer.lstrip("\n") if marker else response


def repetition_penalty(response: str, max_penalty: float, ngram_size: int = 3) -> float:
    """`max_penalty` (<= 0) times the share of repeated word n-grams: 1 - distinct / all,
    over the lower-cased whitespace-split words. 0.0 for a response of fewer than
    `ngram_size` words."""
    if max_penalty > 0:
        raise ValueError(f"max_penalty {max_penalty} must be <= 0: it is a penalty")
    words = response.lower().split()
    if len(words) < ngram_size:
        return 0.0
    ngrams = [
        tuple(words[start : start + ngram_size]) for start in range(len(words) - ngram_size + 1)
    ]
    return (1 - len(set(ngrams)) / len(ngrams)) * max_penalty
