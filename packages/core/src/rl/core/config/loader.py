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
from omegaconf import OmegaConf
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
    layers = [OmegaConf.create(to_dict(Config()))]
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist")
        try:
            layers.append(OmegaConf.load(path))
        except (yaml.YAMLError, OmegaConfBaseException) as error:
            raise ConfigError(f"config file {path} is not valid YAML: {error}") from error
    for override in overrides:
        if "=" not in override:
            raise ConfigError(f"override {override!r} must look like key.sub=value")
    try:
        layers.append(OmegaConf.from_dotlist(list(overrides)))
        merged = OmegaConf.merge(*layers)
        plain: Any = OmegaConf.to_container(merged, resolve=True)
    except OmegaConfBaseException as error:
        raise ConfigError(f"config could not be resolved: {error}") from error
    return from_dict(Config, plain)


def dump_config(config: Config) -> str:
    """The config as YAML (what `rl config show` prints and each run saves)."""
    return yaml.safe_dump(to_dict(config), sort_keys=False)
