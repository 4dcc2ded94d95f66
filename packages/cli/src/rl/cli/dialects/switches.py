"""Sections a system does not read while their switch is off.

A verl config carries every section's defaults, also of roles and features the run does not
use: a reward model with `enable: false`, a critic GRPO never builds, profilers, LoRA at rank
0. verl never reads them, so neither does rl: before mapping, each `Switch` whose switch is
off removes its sections from the composed values (except the keys the system reads
whatever the switch says), so they are neither validated (a `???` in them is no error) nor
mapped, and the report says in one line per switch what was left unread and why.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from rl.cli.dialects.report import UNREAD

MISSING = "???"  # OmegaConf's mandatory value, kept as text until the switches have run

Values = Mapping[str, Any]


def value_at(values: Values, dotted: str, default: Any = None) -> Any:
    """`values["a"]["b"]` for "a.b", or `default` when a part is missing."""
    node: Any = values
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


def truthy(value: Any) -> bool:
    """A switch's value as the system reads it (`None`, `false`, `0`, "" and `???` are off)."""
    return bool(value) and value != MISSING


@dataclass(frozen=True)
class Switch:
    """`sections` (dotted prefixes ending in "." or exact keys; `*` is one key segment, `**`
    one or more) are read only while `on(values, section)` is true; `section` is the
    matched prefix, so a switch can be the section's own `enable`. `switch` says in words
    what governs them; `always_read` keys (relative to the section) stay either way."""

    sections: tuple[str, ...]
    switch: str
    on: Callable[[Values, str], bool]
    always_read: tuple[str, ...] = ()


def own_flag(name: str) -> Callable[[Values, str], bool]:
    """On while the section's own `name` key (e.g. `enable`) is true."""
    return lambda values, section: truthy(value_at(values, section + name))


def flag(dotted: str) -> Callable[[Values, str], bool]:
    """On while the key `dotted` is true."""
    return lambda values, _section: truthy(value_at(values, dotted))


def _pattern(section: str) -> re.Pattern[str]:
    body = re.escape(section).replace(r"\*\*", r"[^.]+(?:\.[^.]+)*").replace(r"\*", r"[^.]+")
    return re.compile(body)


def _matches(values: Values, section: str) -> list[str]:
    """The prefixes (or keys) of `values` that `section` names, outermost first."""
    pattern, found = _pattern(section), []

    def walk(node: Any, prefix: str) -> None:
        if not isinstance(node, Mapping):
            return
        for key, child in node.items():
            dotted = f"{prefix}{key}"
            if section.endswith("."):
                if isinstance(child, Mapping) and pattern.fullmatch(dotted + "."):
                    found.append(dotted + ".")
                    continue
            elif pattern.fullmatch(dotted):
                found.append(dotted)
                continue
            walk(child, dotted + ".")

    walk(values, "")
    return found


def _remove(values: MutableMapping[str, Any], section: str, keep: tuple[str, ...]) -> int:
    """Delete `section` (a prefix or a key) but its `keep` keys; the number of leaves removed."""
    *parents, last = section.rstrip(".").split(".")
    node: Any = values
    for part in parents:
        node = node[part]
    if not section.endswith("."):
        del node[last]
        return 1
    kept = {name: value_at(node[last], name) for name in keep if _has(node[last], name)}
    removed = _count_leaves(node[last]) - len(kept)
    node[last] = {}
    for name, value in kept.items():
        *inner, leaf = name.split(".")
        target = node[last]
        for part in inner:
            target = target.setdefault(part, {})
        target[leaf] = value
    if not node[last]:
        del node[last]
    return removed


def _has(values: Values, dotted: str) -> bool:
    marker = object()
    return value_at(values, dotted, marker) is not marker


def _count_leaves(node: Any) -> int:
    if isinstance(node, Mapping) and node:
        return sum(_count_leaves(child) for child in node.values())
    return 1


def apply(values: MutableMapping[str, Any], switches: Sequence[Switch]) -> list[str]:
    """Remove, in place, every section whose switch is off; one report line per switch
    that removed something."""
    notes = []
    for switch in switches:
        off: list[str] = []
        removed = 0
        for pattern in switch.sections:
            for section in _matches(values, pattern):
                if not switch.on(values, section):
                    removed += _remove(values, section, switch.always_read)
                    off.append(section + ("*" if section.endswith(".") else ""))
        if removed:
            shown = ", ".join(off[:4]) + (f" and {len(off) - 4} more" if len(off) > 4 else "")
            notes.append(f"{UNREAD}{switch.switch} is off, as upstream: {shown} ({removed} keys)")
    return notes


def refuse_missing(values: Values, source: str) -> None:
    """A ConfigError naming the first `???` still unset in a section that is read."""
    from rl.core.config.errors import ConfigError

    def first(node: Any, prefix: str) -> str | None:
        if isinstance(node, Mapping):
            for key, child in node.items():
                found = first(child, f"{prefix}{key}.")
                if found:
                    return found
        elif isinstance(node, list):
            for index, child in enumerate(node):
                found = first(child, f"{prefix[:-1]}[{index}].")
                if found:
                    return found
        elif node == MISSING:
            return prefix[:-1]
        return None

    key = first(values, "")
    if key is not None:
        raise ConfigError(
            f"{source}: {key} is '???' (mandatory) and was not set: add the override {key}=VALUE"
        )
