"""A layout table: rules that map Hugging Face tensor names to megatron-core ones.

A `Rule` says: these HF tensors (a name pattern each, with `{layer}` and
`{expert}` placeholders, and a symbolic shape each) make this one mcore tensor,
through this `Fuse`, sharded over TP like this. A `LayoutTable` finds the rule
for a name in either direction and, for a name it does not know, says which
known pattern is closest.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from .errors import LayoutError
from .fuse import IDENTITY, Fuse
from .tp import TPKind

_PLACEHOLDER = re.compile(r"\\\{(layer|expert)\\\}")
Fields = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Pattern:
    """A tensor name with `{layer}` / `{expert}` placeholders that stand for decimal indices."""

    template: str
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        body = _PLACEHOLDER.sub(lambda m: rf"(?P<{m.group(1)}>\d+)", re.escape(self.template))
        object.__setattr__(self, "regex", re.compile(body))

    def match(self, name: str) -> Fields | None:
        """The placeholder values in `name`, sorted by placeholder, or None if it does not fit."""
        found = self.regex.fullmatch(name)
        return None if found is None else tuple(sorted(found.groupdict().items()))

    def format(self, fields: Fields) -> str:
        return self.template.format(**dict(fields))


@dataclass(frozen=True)
class Rule:
    """HF tensors `hf` (shapes `shapes`, in `ModelDims` names) <-> one mcore tensor `mcore`.

    `tied_to` marks the output layer: when the HF config ties the word
    embeddings, this rule is the embedding's twin named by `tied_to`, and the
    converter drops it on import instead of storing a duplicate.
    """

    mcore: str
    hf: tuple[str, ...]
    shapes: tuple[tuple[str | int, ...], ...]
    fuse: Fuse = IDENTITY
    tp: TPKind = TPKind.REPLICATED
    tied_to: str | None = None

    def __post_init__(self) -> None:
        if len(self.hf) != len(self.shapes) or not self.hf:
            raise ValueError(
                f"rule {self.mcore!r}: one shape per HF name ({self.hf}, {self.shapes})"
            )


def _generic(name: str) -> str:
    """`model.layers.3.mlp.experts.7.x` -> `model.layers.{layer}.mlp.experts.{expert}.x`, for hints."""
    slots = iter(("{layer}", "{expert}"))
    return re.sub(r"\d+", lambda m: next(slots, m.group(0)), name)


class LayoutTable:
    """The rules of one architecture, indexed by HF and by mcore name pattern."""

    def __init__(self, arch: str, rules: tuple[Rule, ...]) -> None:
        self.arch = arch
        self.rules = rules
        self._hf = [(Pattern(n), rule, i) for rule in rules for i, n in enumerate(rule.hf)]
        self._mcore = [(Pattern(rule.mcore), rule) for rule in rules]

    def match_hf(self, name: str) -> tuple[Rule, int, Fields]:
        """(rule, index of `name` among the rule's HF parts, placeholder values) for an HF name."""
        for pattern, rule, index in self._hf:
            fields = pattern.match(name)
            if fields is not None:
                return rule, index, fields
        raise self._unknown(name, [p.template for p, _, _ in self._hf], "Hugging Face")

    def match_mcore(self, name: str) -> tuple[Rule, Fields]:
        """(rule, placeholder values) for a megatron-core name."""
        for pattern, rule in self._mcore:
            fields = pattern.match(name)
            if fields is not None:
                return rule, fields
        raise self._unknown(name, [p.template for p, _ in self._mcore], "megatron-core")

    def _unknown(self, name: str, templates: list[str], side: str) -> LayoutError:
        close = difflib.get_close_matches(_generic(name), templates, n=1, cutoff=0.0)
        hint = f"; the closest known pattern is {close[0]!r}" if close else ""
        return LayoutError(
            f"unknown {side} parameter {name!r} for architecture {self.arch!r}{hint}"
        )
