"""Run other systems' configs as they are: `rl convert --from verl FILE [OVERRIDES]` and
`rl train --from verl FILE [OVERRIDES]`.

`convert(dialect, file, overrides)` composes the upstream file the way its system does,
maps every key to ours through the dialect's table (`mapping.Rule`s) and returns our
config (only what differs from our defaults) with a `Report` that names each upstream key
as mapped, left to our default, ignored or unsupported (with the reason). `detect(file)`
guesses the dialect from the file's top-level keys. verl is implemented; ROLL, ChatLearn
and RLinf are detected and refused by name for now.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rl.core.config.dialects.mapping import translate
from rl.core.config.dialects.report import Report
from rl.core.config.errors import ConfigError

DIALECTS = ("verl", "roll", "chatlearn", "rlinf")
IMPLEMENTED = ("verl",)


@dataclass(frozen=True)
class Conversion:
    config: dict[str, Any]  # ours, nested; only keys that differ from our defaults
    report: Report


def detect(path: Path) -> str:
    """The dialect of `path` from its top-level keys (ConfigError when none fits)."""
    try:
        top = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"{path} could not be read as YAML: {error}") from None
    keys = set(top) if isinstance(top, dict) else set()
    if "actor_rollout_ref" in keys:
        return "verl"
    if "runtime_args" in keys or ("models" in keys and "policy" in (top.get("models") or {})):
        return "chatlearn"
    if "runner" in keys or "component_placement" in (top.get("cluster") or {}):
        return "rlinf"
    if keys & {"actor_train", "actor_infer", "pretrain", "strategy_args"}:
        return "roll"
    defaults = top.get("defaults") if isinstance(top, dict) else None
    if isinstance(defaults, list) and any("ppo_trainer" in str(d) for d in defaults):
        return "verl"
    raise ConfigError(
        f"{path}: cannot tell which system's config this is (top-level keys: "
        f"{', '.join(sorted(keys)) or 'none'}); pass --from " + "|".join(DIALECTS)
    )


def convert(dialect: str, path: Path, overrides: Sequence[str] = ()) -> Conversion:
    """Our config from the `dialect` file `path` with its `overrides` (upstream syntax)."""
    if dialect not in DIALECTS:
        raise ConfigError(f"--from {dialect!r}: unknown dialect; known: {', '.join(DIALECTS)}")
    if dialect not in IMPLEMENTED:
        raise ConfigError(
            f"--from {dialect}: the {dialect} importer is not implemented yet (verl is); "
            "write the config in rl's schema (rl config show prints it)"
        )
    from rl.core.config.dialects import verl

    values = verl.compose(path, overrides)
    source = str(path) + (f" with {len(overrides)} override(s)" if overrides else "")
    config, report = translate(values, verl.RULES, dialect, source, verl.REASONS)
    return Conversion(config, report)
