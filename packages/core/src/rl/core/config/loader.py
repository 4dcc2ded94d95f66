"""Load a config: YAML file(s) + dotted command-line overrides -> typed `Config`.

OmegaConf does the merging and `${...}` interpolation (with a `subtract`
resolver as RLinf uses); `convert.from_dict` does the typing and checks.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from rl.core.config.convert import from_dict, to_dict
from rl.core.config.errors import ConfigError
from rl.core.config.schema import Config


def _register_resolvers() -> None:
    resolvers = {
        "subtract": lambda a, b: a - b,
        "add": lambda a, b: a + b,
        "multiply": lambda a, b: a * b,
    }
    for name, fn in resolvers.items():
        if not OmegaConf.has_resolver(name):
            with warnings.catch_warnings():  # 2.4 renames it; older releases lack the new name
                warnings.simplefilter("ignore", UserWarning)
                OmegaConf.register_new_resolver(name, fn)


def load_config(path: str | Path | None = None, overrides: Sequence[str] = ()) -> Config:
    """The resolved, validated config from an optional YAML file and `key.sub=value` overrides."""
    _register_resolvers()
    layers = [] if path is None else [(_load_file(Path(path)), f"config file {path}")]
    layers += [(_parse_override(o), f"override {o!r}") for o in overrides]
    merged = _merge(OmegaConf.create(to_dict(Config())), layers)
    try:
        plain: Any = OmegaConf.to_container(merged, resolve=True)
    except OmegaConfBaseException as error:
        raise ConfigError(f"config could not be resolved: {_one_line(error)}") from None
    return from_dict(Config, plain)


def config_from_mapping(
    values: dict[str, Any], source: str, overrides: Sequence[str] = ()
) -> Config:
    """The validated config from a nested mapping of our keys over our defaults (what a
    dialect importer produces), then `key.sub=value` overrides; errors say it came from
    `source`."""
    _register_resolvers()
    layers = [(OmegaConf.create(values), source)]
    layers += [(_parse_override(o), f"override {o!r}") for o in overrides]
    merged = _merge(OmegaConf.create(to_dict(Config())), layers)
    try:
        plain: Any = OmegaConf.to_container(merged, resolve=True)
        return from_dict(Config, plain)
    except OmegaConfBaseException as error:
        raise ConfigError(f"{source}: {_one_line(error)}") from None
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from None


def _load_file(path: Path) -> Any:
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    from omegaconf._utils import get_yaml_loader

    try:
        document = yaml.load(path.read_text(encoding="utf-8"), Loader=get_yaml_loader())
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise ConfigError(f"config file {path} is not valid YAML: {_one_line(error)}") from None
    except OSError as error:
        raise ConfigError(f"config file {path} could not be read: {_one_line(error)}") from None
    if document is None:
        document = {}
    if not isinstance(document, dict | list):  # a bare scalar (lists are refused by _merge)
        raise ConfigError(
            f"config file {path} could not be read as a config: its top level is "
            f"{document!r}, not a mapping of sections"
        )
    try:
        return OmegaConf.create(document)
    except OmegaConfBaseException as error:
        raise ConfigError(f"config file {path} is not valid YAML: {_one_line(error)}") from None


def _parse_override(override: str) -> Any:
    key, equals, _ = override.partition("=")
    if not equals:
        raise ConfigError(f"override {override!r} must look like key.sub=value")
    if not all(key.split(".")):
        raise ConfigError(f"override {override!r}: the key {key!r} has an empty part")
    if not all(part.replace("_", "").replace("-", "").isalnum() for part in key.split(".")):
        # OmegaConf reads brackets and other marks in a dotted key as its own syntax
        raise ConfigError(
            f"override {override!r}: the key {key!r} is not a dotted name of config keys "
            "(letters, digits, _ and -)"
        )
    try:
        return OmegaConf.from_dotlist([override])
    except (yaml.YAMLError, OmegaConfBaseException, ValueError) as error:
        raise ConfigError(f"override {override!r} could not be read: {_one_line(error)}") from None


def _merge(base: Any, layers: Sequence[tuple[Any, str]]) -> Any:
    """Each layer over `base`, in order, as one merge (OmegaConf copies the whole base for
    every merge: one per override made a 40-override command spend 0.4 s here); when it
    fails, the layers are merged one by one to name the one that failed (its source)."""
    for layer, source in layers:
        if not isinstance(layer, DictConfig):
            raise ConfigError(f"{source} must be a mapping of sections, got {_plain(layer)!r}")
    try:
        return OmegaConf.merge(base, *(layer for layer, _ in layers))
    except (OmegaConfBaseException, TypeError, ValueError) as error:
        for layer, source in layers:
            base = _merge_one(base, layer, source)  # raises, naming the layer
        raise ConfigError(f"the config could not be merged: {_one_line(error)}") from None


def _merge_one(base: Any, layer: Any, source: str) -> Any:
    """`layer` over `base`; a list where a section is (or the reverse) names the key."""
    try:
        return OmegaConf.merge(base, layer)
    except (OmegaConfBaseException, TypeError, ValueError) as error:
        conflict = _container_conflict(_plain(base), _plain(layer))
        if conflict is None:
            raise ConfigError(f"{source} could not be merged: {_one_line(error)}") from None
        key, value, expected = conflict
        raise ConfigError(f"{key} = {value!r} is not allowed: expected {expected}") from None


def _container_conflict(base: Any, layer: Any, prefix: str = "") -> tuple[str, Any, str] | None:
    """The first key where `layer` puts a list over a mapping of `base`, or the reverse."""
    if not isinstance(base, dict) or not isinstance(layer, dict):
        return None
    for name, value in layer.items():
        key, default = f"{prefix}{name}", base.get(name)
        if isinstance(default, dict) and isinstance(value, list):
            return key, value, "a mapping"
        if isinstance(default, list) and isinstance(value, dict):
            return key, value, "a list"
        found = _container_conflict(default, value, f"{key}.")
        if found is not None:
            return found
    return None


def _plain(node: Any) -> Any:
    if isinstance(node, (DictConfig, ListConfig)):
        return OmegaConf.to_container(node, resolve=False)
    return node


def _one_line(error: BaseException) -> str:
    """An OmegaConf/YAML message in one line (they add `full_key: ...` lines), naming the key."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = " ".join(line for line in lines if not line.startswith(("full_key:", "object_type=")))
    full_key = getattr(error, "full_key", None)
    return f"{text} (at {full_key})" if full_key else text or type(error).__name__


def dump_config(config: Config) -> str:
    """The config as YAML (what `rl config show` prints and each run saves)."""
    return yaml.safe_dump(to_dict(config), sort_keys=False)
