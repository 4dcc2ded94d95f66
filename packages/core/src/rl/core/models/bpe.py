"""Byte-level BPE vocabularies of a real model's size, assembled in code.

The real merges of Qwen's or Llama-3's tokenizer cannot be downloaded here. Instead the
BPE trainer of `tokenizers` learns a few thousand merges from a built-in English, maths
and code corpus (`bpe_corpus`), so that ordinary text splits into realistic pieces
(" the", " answer", " 42" for Llama-3), and deterministic synthetic merges fill the
vocabulary up to its real size. Each synthetic merge joins a word-start piece and a
lower-case continuation that exist already into a new, unique token, so the filler is
reachable from text, as the long tail of a real vocabulary is.

Ids follow the real layout: the 256 byte tokens first, in GPT-2's byte-to-unicode order
(id 0 is "!"), then one token per merge, in merge order.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from functools import cache
from itertools import product
from typing import Any

from rl.core.models.bpe_corpus import corpus_lines

# The pre-tokenizer split patterns the families document (GPT-4-like): Qwen2 takes digits
# one at a time, Llama-3 in runs of one to three.
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
LEARNED_MERGES = 6000  # at most; the corpus yields a few thousand
Merge = tuple[str, str]
_WORD_START = re.compile(r"Ġ?[A-Za-z]+")
_CONTINUATION = re.compile(r"[a-z]+")


def byte_alphabet() -> list[str]:
    """The 256 characters that stand for bytes, in GPT-2's order (printable ones first)."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    others = [byte for byte in range(256) if byte not in printable]
    return [chr(byte) for byte in printable] + [chr(256 + i) for i in range(len(others))]


def split_pre_tokenizer(split_regex: str, *, add_prefix_space: bool = False) -> Any:
    """The family's split regex, then the byte-level mapping (regex already applied)."""
    from tokenizers import Regex, pre_tokenizers

    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(split_regex), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space, use_regex=False),
        ]
    )


@cache
def learn_merges(split_regex: str, max_merges: int = LEARNED_MERGES) -> tuple[Merge, ...]:
    """Merges the `tokenizers` BPE trainer learns from the built-in corpus, in rank order."""
    import json

    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = split_pre_tokenizer(split_regex)
    trainer = trainers.BpeTrainer(
        vocab_size=256 + max_merges,
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus_lines(), trainer)
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    return tuple((left, right) for left, right in merges)


def digit_merges(longest_run: int) -> Iterator[Merge]:
    """Merges that make every number of 2..`longest_run` digits one token ("12", "123")."""
    for length in range(2, longest_run + 1):
        for digits in product("0123456789", repeat=length):
            yield "".join(digits[:-1]), digits[-1]


def _diagonal(lefts: Sequence[str], rights: Sequence[str]) -> Iterator[Merge]:
    """All (left, right) pairs, ordered by the sum of their ranks: frequent pieces first."""
    for total in range(len(lefts) + len(rights) - 1):
        for i in range(max(0, total - len(rights) + 1), min(total, len(lefts) - 1) + 1):
            yield lefts[i], rights[total - i]


def synthetic_merges(tokens: Sequence[str]) -> Iterator[Merge]:
    """Candidate filler merges over `tokens` (rank order): word start + continuation first,
    then any pair, should the first run out."""
    starts = [token for token in tokens if _WORD_START.fullmatch(token)]
    continuations = [token for token in tokens if _CONTINUATION.fullmatch(token)]
    yield from _diagonal(starts, continuations)
    yield from _diagonal(tokens, tokens)


def byte_level_vocab(
    split_regex: str, regular_tokens: int, *, digit_run: int = 1
) -> tuple[dict[str, int], list[Merge]]:
    """A vocabulary of exactly `regular_tokens` tokens and the merges that build it.

    Order of the merges (their rank): learned from the corpus, then the multi-digit
    numbers up to `digit_run` digits (for a split regex that keeps such runs together),
    then synthetic fillers. A merge whose result exists already is skipped, so every
    token is made by one merge only.
    """
    vocab = {char: i for i, char in enumerate(byte_alphabet())}
    if regular_tokens < len(vocab):
        raise ValueError(f"a byte-level vocabulary needs at least 256 tokens, not {regular_tokens}")
    merges: list[Merge] = []

    def take(candidates: Iterator[Merge]) -> None:
        for left, right in candidates:
            if len(vocab) == regular_tokens:
                return
            if left + right not in vocab:
                vocab[left + right] = len(vocab)
                merges.append((left, right))

    take(iter(learn_merges(split_regex)))
    take(digit_merges(digit_run))
    take(synthetic_merges(list(vocab)[256:] or list(vocab)))
    if len(vocab) < regular_tokens:
        raise ValueError(f"could not fill {regular_tokens} tokens (got {len(vocab)})")
    return vocab, merges
