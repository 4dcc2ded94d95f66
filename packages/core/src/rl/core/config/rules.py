"""What a config value may be, as data: a test and the words that describe it.

A field declares its rule where it is declared (`setting(default, rule)`), and
`check_fields(instance)` (what `Checked` runs after `__init__`) raises `FieldError` naming
the first field that breaks its rule, relative to the dataclass; `convert.from_dict` adds
the section path. `require` is for a check across fields. Non-finite floats never get here
(`convert` refuses them), so the rules only compare.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from rl.core.config.errors import FieldError


@dataclass(frozen=True)
class Rule:
    test: Callable[[Any], bool]
    allowed: str


RULE = "rule"  # the field metadata key of a declared rule


def setting(
    default: Any = MISSING,
    rule: Rule | None = None,
    *,
    default_factory: Any = MISSING,
    metadata: dict[str, Any] | None = None,
) -> Any:
    """A config field and, declared beside it, the `rule` its value must meet."""
    meta = {**(metadata or {}), **({RULE: rule} if rule is not None else {})}
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata=meta)
    return field(default=default, metadata=meta)


def check_fields(instance: Any) -> None:
    """Raise `FieldError` for the first field of `instance`, in declaration order, whose
    value breaks the rule declared with it (`setting`)."""
    for item in fields(instance):
        rule = item.metadata.get(RULE)
        if rule is not None:
            value = getattr(instance, item.name)
            if not rule.test(value):
                raise FieldError(item.name, value, rule.allowed)


class Checked:
    """Base of the config sections: their declared rules are checked when one is built
    (a section with checks across fields calls `check_fields` from its own
    `__post_init__`, then makes them)."""

    def __post_init__(self) -> None:
        check_fields(self)


def check(instance: Any, **rules: Rule) -> None:
    """Raise `FieldError` for the first field of `instance` that breaks its rule."""
    for name, rule in rules.items():
        value = getattr(instance, name)
        if not rule.test(value):
            raise FieldError(name, value, rule.allowed)


def require(condition: bool, key: str, value: object, allowed: str) -> None:
    """Raise `FieldError` unless `condition`: a check across fields (`key` is relative to
    the dataclass checked)."""
    if not condition:
        raise FieldError(key, value, allowed)


def at_least(low: int | float) -> Rule:
    return Rule(lambda value: value >= low, f">= {low}")


def above(low: int | float) -> Rule:
    return Rule(lambda value: value > low, f"> {low}")


def between(low: float, high: float, *, open_low: bool = False, open_high: bool = False) -> Rule:
    """`in [low, high]`; `open_low` / `open_high` exclude an end."""

    def test(value: Any) -> bool:
        above_low = value > low if open_low else value >= low
        below_high = value < high if open_high else value <= high
        return above_low and below_high

    brackets = ("(" if open_low else "[", ")" if open_high else "]")
    return Rule(test, f"in {brackets[0]}{low}, {high}{brackets[1]}")


def optional(rule: Rule) -> Rule:
    """`rule`, or null."""
    return Rule(lambda value: value is None or rule.test(value), f"{rule.allowed} or null")


def off_or_at_least_one(off: tuple[int, ...]) -> Rule:
    """One of the `off` values (the feature is disabled), or >= 1."""
    names = " or ".join(str(v) for v in off)
    return Rule(lambda value: value in off or value >= 1, f"{names} (off) or >= 1")


POSITIVE_INT = at_least(1)
NON_NEGATIVE = at_least(0)
POSITIVE = above(0)
PROBABILITY = between(0, 1)
FRACTION = between(0, 1, open_high=True)
NOT_EMPTY = Rule(lambda value: len(value) > 0, "not empty")
SEED = Rule(lambda value: 0 <= value < 2**32, "in [0, 2**32)")
FILES = Rule(lambda value: len(value) > 0, "at least one file")
# test_freq, save_freq: -1 and 0 are off, else every N steps
FREQUENCY = off_or_at_least_one((-1, 0))
BETAS = Rule(
    lambda betas: len(betas) == 2 and all(0 <= beta < 1 for beta in betas),
    "two numbers in [0, 1)",
)
