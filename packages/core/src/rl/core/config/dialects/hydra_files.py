"""Compose a Hydra config file as its own system would (verl, ROLL and RLinf all use
Hydra): the `defaults:` list with group files and `group@package` entries (`@_here_`
included), `_self_` ordering, `hydra.searchpath`, Hydra's override syntax (`key=v`,
`+key=v`, `~key`, `++key=v`, list literals); OmegaConf resolves interpolations (relative,
`oc.select`, whole nodes, any resolver the dialect registered) and refuses a `???` left
unset. Hydra and OmegaConf do all of that themselves; this module turns their errors into
one line that names the file and key."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rl.core.config.errors import ConfigError


def compose(path: Path, overrides: Sequence[str] = (), what: str = "config") -> dict[str, Any]:
    """The composed and resolved config of the file `path` with `overrides`, as plain
    containers; ConfigError naming the file and key on any failure."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException, MissingConfigException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    if not path.is_file():
        raise ConfigError(f"{path} does not exist (a {what} file)")
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(path.parent.resolve()), version_base=None):
            config = hydra_compose(config_name=path.stem, overrides=list(overrides))
    except MissingConfigException as error:
        raise ConfigError(
            f"{path}: {one_line(error)} (a `defaults:` entry names a file that is not in "
            "the config folder or the hydra.searchpath)"
        ) from None
    except HydraException as error:
        raise ConfigError(f"{path}: {one_line(error)}") from None
    except OmegaConfBaseException as error:
        raise ConfigError(f"{path}: {one_line(error)}") from None
    finally:
        GlobalHydra.instance().clear()
    OmegaConf.set_struct(config, False)
    config.pop("hydra", None)
    return resolve(config, path)


def resolve(config: Any, path: Path | str) -> dict[str, Any]:
    """An OmegaConf config as plain containers, interpolations resolved; ConfigError naming
    `path` and the key when one cannot be resolved or a `???` is still unset."""
    from omegaconf import OmegaConf
    from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

    try:
        values = OmegaConf.to_container(config, resolve=True, throw_on_missing=True)
    except MissingMandatoryValue as error:
        raise ConfigError(
            f"{path}: {error.full_key} is '???' (mandatory) and was not set: add the override "
            f"{error.full_key}=VALUE"
        ) from None
    except OmegaConfBaseException as error:
        key = getattr(error, "full_key", None) or "?"
        raise ConfigError(f"{path}: {key} could not be resolved: {one_line(error)}") from None
    assert isinstance(values, dict)
    return {str(key): value for key, value in values.items()}


def one_line(error: BaseException) -> str:
    text = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
    return text.split(" full_key:")[0].split(" Config search path:")[0]
