"""Compose a Hydra config file as its own system would (verl, ROLL and RLinf all use
Hydra): the `defaults:` list with group files and `group@package` entries (`@_here_`
included), `_self_` ordering, `hydra.searchpath`, Hydra's override syntax (`key=v`,
`+key=v`, `~key`, `++key=v`, list literals); OmegaConf resolves interpolations (relative,
`oc.select`, whole nodes, any resolver the dialect registered) and refuses a `???` left
unset. Hydra and OmegaConf do all of that themselves; this module turns their errors into
one line that names the file and key."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rl.core.config.errors import ConfigError


def compose(
    path: Path, overrides: Sequence[str] = (), what: str = "config", allow_missing: bool = False
) -> dict[str, Any]:
    """The composed and resolved config of the file `path` with `overrides`, as plain
    containers; ConfigError naming the file and key on any failure. `allow_missing` keeps
    an unset `???` as the text "???" (for `switches.refuse_missing` to judge once the
    sections the system does not read are gone)."""
    return resolve(compose_unresolved(path, overrides, what), path, allow_missing)


def compose_unresolved(path: Path, overrides: Sequence[str] = (), what: str = "config") -> Any:
    """The composed OmegaConf config, its interpolations not resolved yet (without Hydra's
    own `hydra` node)."""
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
        with (
            warnings.catch_warnings(),
            initialize_config_dir(config_dir=str(path.parent.resolve()), version_base=None),
        ):
            # a defaults list without `_self_` composes the file last, as its systems expect
            warnings.filterwarnings("ignore", message=".*missing `_self_`", category=UserWarning)
            config = hydra_compose(
                config_name=path.stem, overrides=[*overrides, *_package_searchpath(path)]
            )
    except MissingConfigException as error:
        raise ConfigError(
            f"{path}: {one_line(error)} (a `defaults:` entry names a file that is not in "
            f"the config folder or the hydra.searchpath{_missing_searchpath(path)})"
        ) from None
    except HydraException as error:
        raise ConfigError(f"{path}: {one_line(error)}") from None
    except OmegaConfBaseException as error:
        raise ConfigError(f"{path}: {one_line(error)}") from None
    finally:
        GlobalHydra.instance().clear()
    OmegaConf.set_struct(config, False)
    config.pop("hydra", None)
    return config


def _searchpath(path: Path) -> list[Any]:
    """The `hydra.searchpath` entries the file declares ([] when none or unreadable)."""
    import yaml

    try:
        top = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        entries = (top.get("hydra") or {}).get("searchpath") or []
    except (OSError, yaml.YAMLError, AttributeError):
        return []
    return list(entries) if isinstance(entries, list) else []


def _package_searchpath(path: Path) -> list[str]:
    """The file's `hydra.searchpath` with each `pkg://a.b.c` as the folder Python would
    import it from (`file:///...`), as one `hydra.searchpath=[...]` override; [] when it
    names no package. Hydra reads `pkg://` by importing the package, and rl never imports
    an upstream system (verl's `__init__` needs its whole stack): the folder is found as
    `find_spec` finds the top-level package, which imports nothing."""
    import importlib.util

    entries = _searchpath(path)
    if not any(isinstance(e, str) and e.startswith("pkg://") for e in entries):
        return []
    resolved = []
    for entry in entries:
        if isinstance(entry, str) and entry.startswith("pkg://"):
            top, *rest = entry.removeprefix("pkg://").strip("/").replace("/", ".").split(".")
            try:
                spec = importlib.util.find_spec(top)
            except (ImportError, ValueError):
                spec = None
            folders = [
                Path(location, *rest)
                for location in ((spec.submodule_search_locations or []) if spec else [])
                if Path(location, *rest).is_dir()
            ]
            if not folders:
                return []  # not found: Hydra says so itself
            entry = f"file://{folders[0].resolve()}"
        resolved.append(entry)
    return [f"hydra.searchpath=[{','.join(resolved)}]"]


def _missing_searchpath(path: Path) -> str:
    """`; its hydra.searchpath X is read against the current directory (C), which has no
    such folder: ...` for each relative `file://` entry of `path` that is not there ("" when
    none): verl's experimental configs name `file://verl/trainer/config`, which holds when
    run from verl's checkout root, as its scripts are."""
    import os

    searchpath = _searchpath(path)
    cwd = Path.cwd()
    missing = [
        entry
        for entry in searchpath
        if isinstance(entry, str)
        and entry.startswith("file://")
        and not os.path.isabs(entry.removeprefix("file://"))
        and not (cwd / entry.removeprefix("file://")).is_dir()
    ]
    if not missing:
        return ""
    return (
        f"; its hydra.searchpath {', '.join(missing)} is read against the current directory "
        f"({cwd}), which has no such folder: run from the folder that holds it (verl's "
        "scripts run from its checkout's root)"
    )


def interpolated_roots(config: Any) -> set[str]:
    """The top-level keys that some `${...}` of the (unresolved) config refers to."""
    import re

    from omegaconf import OmegaConf

    roots: set[str] = set()
    for text in _strings(OmegaConf.to_container(config, resolve=False)):
        roots.update(re.findall(r"\$\{(?:[\w.]+:)?\s*([A-Za-z_]\w*)", text))
    return roots


def _strings(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [s for value in node.values() for s in _strings(value)]
    if isinstance(node, list):
        return [s for value in node for s in _strings(value)]
    return [node] if isinstance(node, str) and "${" in node else []


def resolve(config: Any, path: Path | str, allow_missing: bool = False) -> dict[str, Any]:
    """An OmegaConf config as plain containers, interpolations resolved; ConfigError naming
    `path` and the key when one cannot be resolved or (unless `allow_missing`) a `???` is
    still unset."""
    from omegaconf import OmegaConf
    from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

    try:
        values = OmegaConf.to_container(config, resolve=True, throw_on_missing=not allow_missing)
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
