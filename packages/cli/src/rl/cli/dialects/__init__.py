"""Run other systems' configs as they are: `rl convert --from verl FILE [OVERRIDES]` and
`rl train --from verl FILE [OVERRIDES]`.

`convert(dialect, file, overrides)` composes the upstream file the way its system does,
maps every key to ours through the dialect's table (`mapping.Rule`s) and returns our
config (only what differs from our defaults) with a `Report` that names each upstream key
as mapped, left to our default, ignored or unsupported (with the reason). `detect(file)`
guesses the dialect from the file's top-level keys. Each dialect is one typed record
(`record.Dialect`, built by its module: `verl`, `roll`, ...), found by name in `registry`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rl.cli.dialects import switches
from rl.cli.dialects.mapping import translate
from rl.cli.dialects.record import Dialect, Job
from rl.cli.dialects.registry import DIALECTS, find, registry
from rl.cli.dialects.report import Report
from rl.core.config.errors import ConfigError

IMPLEMENTED = DIALECTS  # every dialect rl knows has its record


@dataclass(frozen=True)
class Conversion:
    config: dict[str, Any]  # ours, nested; only keys that differ from our defaults
    report: Report
    job: Job = "train"  # what runs it: `rl train`, or `rl sft` for an SFT trainer config
    own: tuple[str, ...] = ()  # overrides in rl's own keys, applied after the conversion


def detect(path: Path) -> str:
    """The dialect of `path` from its top-level keys, or of a launch script from its
    python command (ConfigError when none fits)."""
    if path.suffix == ".sh":
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        for dialect in registry().values():  # each reader names its system's entry points
            if dialect.launch is not None and dialect.launch.mentions(text):
                return dialect.name
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


def convert(dialect: str, path: Path, overrides: Sequence[str] = ()) -> Conversion:
    """Our config from the `dialect` file (or launch script) `path` with its `overrides`
    (upstream syntax, or rl's own keys: `own_keys`)."""
    record = find(dialect)
    overrides, own = _own_overrides(record, path, overrides)
    given = len(overrides) + len(own)
    source = str(path) + (f" with {given} override(s)" if given else "")
    notes: list[str] = []
    if path.suffix == ".sh":
        path, overrides, notes = _from_launch_script(record, path, overrides)
    values = record.compose(path, overrides)
    for rewrite in record.rewrites:
        notes += rewrite(values)
    notes += switches.apply(values, record.switches)
    switches.refuse_missing(values, str(path))
    notes += record.check(values)
    table = record.table
    job: Job = "train"
    for variant in record.variants:  # another kind of config of the system (verl's SFT)
        if variant.applies(values):
            table, job = variant.table, variant.job
            notes.append(variant.note)
    config, report = translate(values, table.rules, dialect, source, table.reasons)
    if own:
        notes.append(f"rl's own keys, applied last: {' '.join(own)}")
    report.notes += notes
    return Conversion(config, report, job, tuple(own))


def _own_overrides(
    dialect: Dialect, path: Path, overrides: Sequence[str]
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
        keys = [key for key, _ in flatten(dialect.compose(file, script_overrides))]
    except ConfigError:
        return list(overrides), []
    return own_keys.split(overrides, keys, dialect.table.rules, documented_keys(dialect.table))


def _from_launch_script(
    dialect: Dialect, script: Path, overrides: Sequence[str]
) -> tuple[Path, list[str], list[str]]:
    """The config file and overrides a launch script runs when rl is given `overrides`
    after it (they stand where its command has "$@", else after its own), and notes for
    the report. The script is read as bash would run it, never run (`scripts`)."""
    if dialect.launch is None:
        raise ConfigError(
            f"{script}: rl does not read {dialect.name}'s launch scripts yet; pass the "
            f"{dialect.name} config file and its overrides instead"
        )
    launch = dialect.launch.read(script, overrides)
    return launch.config_file, launch.overrides, launch.notes
