"""Overrides as data: applied to a loaded `Config`, and written as a user types them.

Preflight uses both when it proposes a change (the shrink of a placement this machine
cannot run): it checks that the changed config passes, then prints the overrides.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rl.core.config.convert import to_dict
from rl.core.config.loader import config_from_mapping
from rl.core.config.schema import Config


def apply_overrides(config: Config, overrides: Mapping[str, Any]) -> Config:
    """`config` with `overrides` (dotted key -> value; a mapping value is merged into the
    mapping at that key, as a command-line override is), validated again."""
    values = to_dict(config)
    for key, value in overrides.items():
        *parents, last = key.split(".")
        node = values
        for part in parents:
            node = node.setdefault(part, {})
        if isinstance(value, Mapping) and isinstance(node.get(last), dict):
            node[last] = {**node[last], **value}
        else:
            node[last] = value
    return config_from_mapping(values, "the config with " + render_overrides(overrides))


def render_overrides(overrides: Mapping[str, Any]) -> str:
    """`key=value ...` as typed on the command line: null for None, a mapping in YAML's
    flow style (the whole override quoted for the shell)."""
    items = []
    for key, value in overrides.items():
        if isinstance(value, Mapping):
            inner = ", ".join(f'"{k}": {_scalar(v)}' for k, v in value.items())
            items.append(f"'{key}={{{inner}}}'")
        else:
            items.append(f"{key}={_scalar(value)}")
    return " ".join(items)


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
