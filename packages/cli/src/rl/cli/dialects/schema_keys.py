"""Our config's settable keys, from the schema's dataclasses: a leaf is a field that is not
itself a section; under a free-form mapping field (`override_transformer_config`,
`engine_kwargs`, ...) any sub-key is settable."""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import Any

from rl.core.config import sections
from rl.core.config.schema import Config


@cache
def leaves() -> dict[str, Any]:
    """Dotted key -> default value, for every leaf of `Config`."""
    out: dict[str, Any] = {}

    def walk(obj: Any, prefix: str) -> None:
        for spec in dataclasses.fields(obj):
            value = getattr(obj, spec.name)
            if spec.name == sections.FIELD:  # the backends' sections, under their own keys
                for key, section in value.items():
                    walk(section, f"{prefix}{key}.")
            elif dataclasses.is_dataclass(value):
                walk(value, f"{prefix}{spec.name}.")
            else:
                out[f"{prefix}{spec.name}"] = value

    walk(Config(), "")
    return out


def settable(key: str) -> bool:
    """Whether `key` names one of our leaves, or a key inside a free-form mapping leaf."""
    table = leaves()
    if key in table:
        return True
    parts = key.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        parent = ".".join(parts[:cut])
        if parent in table:
            return isinstance(table[parent], dict)
    return False


def default(key: str) -> Any:
    """Our default for a leaf (None for keys inside a mapping)."""
    return leaves().get(key)
