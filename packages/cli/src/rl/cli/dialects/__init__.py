"""Run other systems' configs as they are: `rl convert --from verl FILE [OVERRIDES]` and
`rl train --from verl FILE [OVERRIDES]`.

`convert(dialect, file, overrides)` composes the upstream file the way its system does,
maps every key to ours through the dialect's table (`mapping.Rule`s) and returns our
config (only what differs from our defaults) with a `Report` that names each upstream key
as mapped, left to our default, ignored or unsupported (with the reason). `detect(file)`
guesses the dialect from the file's top-level keys. Each dialect is one module here
(`verl`, `roll`, ...) with its table; `module(dialect)` names the interface.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from rl.cli.dialects import switches
from rl.cli.dialects.mapping import translate
from rl.cli.dialects.report import Report
from rl.core.config.errors import ConfigError

DIALECTS = ("verl", "roll", "chatlearn", "rlinf")
IMPLEMENTED = ("verl", "roll", "chatlearn", "rlinf")


@dataclass(frozen=True)
class Conversion:
    config: dict[str, Any]  # ours, nested; only keys that differ from our defaults
    report: Report
    job: str = "train"  # what runs it: `rl train`, or `rl sft` for an SFT trainer config
    own: tuple[str, ...] = ()  # overrides in rl's own keys, applied after the conversion


def detect(path: Path) -> str:
    """The dialect of `path` from its top-level keys, or of a launch script from its
    python command (ConfigError when none fits)."""
    if path.suffix == ".sh":
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        for dialect in IMPLEMENTED:  # each reader names its system's entry points
            mentions = getattr(module(dialect), "mentions_entry", None)
            if mentions is not None and mentions(text):
                return dialect
        raise ConfigError(f"{path}: no launch command of a known system in the script")
    try:
        top = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"{path} could not be read as YAML: {error}") from None
    keys = set(top) if isinstance(top, dict) else set()
    if "actor_rollout_ref" in keys or "partial_pretrain" in (top.get("model") or {}):
        return "verl"  # its PPO trainer config, or its SFT trainer config
    if keys & {"runtime_args", "runtime", "runtime_env"} or (
        "models" in keys and "policy" in (top.get("models") or {})
    ):
        return "chatlearn"  # the current format, or the legacy one (refused by name)
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


def module(dialect: str) -> ModuleType:
    """The importer of `dialect`: `compose(path, overrides)` (plain values; an unset `???`
    may be left as "???"), optionally `read_launch_script(script, overrides)` (a
    `scripts.Launch`: the config file and overrides the system's launch script runs) with
    `mentions_entry(text)` (whether a script's text names the system's entry point),
    `REWRITES` (what the system does to its config before reading
    it: functions of the values that change them in place and return report notes),
    `SWITCHES` (sections not read while their switch is off),
    `RULES`, `REASONS`, `check(values)` (notes; ConfigError on inconsistent values),
    `DESCRIPTION`."""
    if dialect not in DIALECTS:
        raise ConfigError(f"--from {dialect!r}: unknown dialect; known: {', '.join(DIALECTS)}")
    if dialect not in IMPLEMENTED:
        raise ConfigError(
            f"--from {dialect}: the {dialect} importer is not implemented yet "
            f"({', '.join(IMPLEMENTED)} are); write the config in rl's schema "
            "(rl config show prints it)"
        )
    return importlib.import_module(f"rl.cli.dialects.{dialect}")


def convert(dialect: str, path: Path, overrides: Sequence[str] = ()) -> Conversion:
    """Our config from the `dialect` file (or launch script) `path` with its `overrides`
    (upstream syntax, or rl's own keys: `own_keys`)."""
    importer = module(dialect)
    overrides, own = _own_overrides(importer, dialect, path, overrides)
    given = len(overrides) + len(own)
    source = str(path) + (f" with {given} override(s)" if given else "")
    notes: list[str] = []
    if path.suffix == ".sh":
        path, overrides, notes = _from_launch_script(dialect, path, overrides)
    values = importer.compose(path, overrides)
    for rewrite in importer.REWRITES:
        notes += rewrite(values)
    notes += switches.apply(values, importer.SWITCHES)
    switches.refuse_missing(values, str(path))
    notes += importer.check(values)
    tables, job = importer, "train"
    if dialect == "verl":
        from rl.cli.dialects import verl_sft

        if verl_sft.is_sft(values):
            tables, job = verl_sft, "sft"
            notes.append("verl's SFT trainer config: run it with `rl sft --from verl`")
        from rl.cli.dialects import verl_generation

        if verl_generation.is_generation(values):
            tables, job = verl_generation, "generate"
            notes.append("verl's generation config: run it with `rl generate --from verl`")
    config, report = translate(values, tables.RULES, dialect, source, tables.REASONS)
    if own:
        notes.append(f"rl's own keys, applied last: {' '.join(own)}")
    report.notes += notes
    return Conversion(config, report, job, tuple(own))


def _own_overrides(
    importer: ModuleType, dialect: str, path: Path, overrides: Sequence[str]
) -> tuple[list[str], list[str]]:
    """(the upstream overrides, rl's own) of `overrides`: an override is ours when its
    key is not the upstream system's but is a key of our schema (`own_keys`)."""
    from rl.cli.dialects import own_keys, schema_keys
    from rl.cli.dialects.coverage import documented_keys
    from rl.cli.dialects.mapping import flatten

    candidates = [
        o
        for o in overrides
        if "=" in o and not o.startswith(("+", "~")) and schema_keys.settable(own_keys.key_of(o))
    ]
    if not candidates:
        return list(overrides), []
    # the upstream keys: the file composed with the overrides that cannot be ours (they
    # may fill a mandatory `???`); if even that fails, the real composition says why
    theirs = [o for o in overrides if o not in candidates]
    try:
        file, script_overrides = path, theirs
        if path.suffix == ".sh":
            file, script_overrides, _ = _from_launch_script(dialect, path, theirs)
        keys = [key for key, _ in flatten(importer.compose(file, script_overrides))]
    except ConfigError:
        return list(overrides), []
    return own_keys.split(overrides, keys, importer, documented_keys(dialect))


def _from_launch_script(
    dialect: str, script: Path, overrides: Sequence[str]
) -> tuple[Path, list[str], list[str]]:
    """The config file and overrides a launch script runs when rl is given `overrides`
    after it (they stand where its command has "$@", else after its own), and notes for
    the report. The script is read as bash would run it, never run (`scripts`)."""
    read = getattr(module(dialect), "read_launch_script", None)
    if read is None:
        raise ConfigError(
            f"{script}: rl does not read {dialect}'s launch scripts yet; pass the {dialect} "
            "config file and its overrides instead"
        )
    launch = read(script, overrides)
    return launch.config_file, launch.overrides, launch.notes
