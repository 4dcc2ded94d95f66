"""The config sections backends contribute (`actor.fsdp_config`, `actor.megatron`, ...).

A backend's `EngineSpec` names a key and the frozen dataclass of its section; rl-core
finds them through the engine registry and only routes the key: the section's fields,
defaults and checks are the backend's. `ActorConfig` / `CriticConfig` keep the sections in
`backends` and hand them out as attributes (`config.actor.fsdp_config`) for users and
tests; shipped code reads them typed through the role's spec
(`rl.core.role_spec.RoleSpec.backend(key, cls)`, an isinstance-checked lookup; a test keeps
it so). A run writes and shows them under their keys.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any

from rl.core.config.errors import ConfigError
from rl.core.imports import is_installed

# the field of a config section that holds the backends' sections
FIELD = "backends"


@cache
def section_classes() -> dict[str, type]:
    """Section key -> dataclass, for every installed train engine that contributes one."""
    from rl.core.registry import installed_engines

    classes: dict[str, type] = {}
    for engine in installed_engines("train"):
        spec = engine.spec
        if not (spec.config_key and spec.config_section):
            continue
        module, _, attribute = spec.config_section.partition(":")
        if is_installed(module):
            classes[spec.config_key] = getattr(importlib.import_module(module), attribute)
    return classes


def default_sections() -> dict[str, Any]:
    """Every contributed section at its defaults."""
    return {key: cls() for key, cls in section_classes().items()}


def read_sections(data: dict[str, Any], prefix: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the keys of `data` that are not backend sections, every section built from its
    keys in `data` or at its defaults). A section key of a backend that is not installed
    is refused with what to install."""
    from rl.core.config.convert import from_dict
    from rl.core.registry import KNOWN_SECTIONS

    if FIELD in data:
        raise ConfigError(
            f"unknown config key {prefix + FIELD!r}: the backends' sections are set by their "
            f"own keys ({', '.join(f'{prefix}{k}' for k in sorted(section_classes()))})"
        )
    classes = section_classes()
    sections = default_sections()
    rest = {}
    for key, value in data.items():
        if key in classes:
            sections[key] = from_dict(classes[key], value, f"{prefix}{key}.")
        elif key in KNOWN_SECTIONS:
            raise ConfigError(
                f"{prefix}{key} is the section of a backend that is not installed: "
                f"pip install {KNOWN_SECTIONS[key]}"
            )
        else:
            rest[key] = value
    return rest, sections


class HasBackendSections:
    """Mixin of the config sections that hold backends' sections in `backends`."""

    def __getattr__(self, name: str) -> Any:
        sections = self.__dict__.get(FIELD)
        if sections is not None and name in sections:
            return sections[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
