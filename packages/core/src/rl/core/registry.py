"""The engine registry: which training backends and rollout engines are installed.

A backend package registers each engine it ships as an entry point in the
`rl.engines` group whose value is an `EngineSpec`, e.g. in rl-fsdp's pyproject:

    [project.entry-points."rl.engines"]
    fsdp = "rl.fsdp.registration:FSDP"

rl-core never imports a backend by name, so `pip install rl-core rl-megatron`
is all it takes for `train_backend: megatron` to be found.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from dataclasses import dataclass
from typing import Any, Literal

from rl.core.errors import ConfigError
from rl.core.imports import MissingDependencyError, is_installed

ENTRY_POINT_GROUP = "rl.engines"
Role = Literal["train", "rollout"]

# Where to get the engines we know of, for the "not installed" message.
KNOWN_ENGINES: dict[str, str] = {
    "fsdp": "rl-fsdp",
    "megatron": "rl-megatron",
    "hf": "rl-rollout",
    "vllm": "rl-rollout[vllm]",
    "sglang": "rl-rollout[sglang]",
}
# the config sections those backends contribute, for the "not installed" message
KNOWN_SECTIONS: dict[str, str] = {"fsdp_config": "rl-fsdp", "megatron": "rl-megatron"}


@dataclass(frozen=True)
class EngineSpec:
    """What a backend declares about one engine it provides.

    `factory` is "module:attribute" of the engine class, imported only when the
    engine is built; `requires` are the third-party modules it needs and
    `install` is what to pip-install when they are missing.
    """

    name: str
    role: Role
    factory: str
    requires: tuple[str, ...] = ()
    install: str = ""
    description: str = ""
    # the config section the backend contributes under actor/critic (its key, and the
    # "module:Class" of its frozen dataclass, which imports none of `requires`): the
    # backend owns and validates it; rl-core only routes the key (rl.core.config.sections)
    config_key: str = ""
    config_section: str = ""


@dataclass(frozen=True)
class InstalledEngine:
    """An engine found through the entry points, with where it came from."""

    spec: EngineSpec
    distribution: str
    version: str

    @property
    def missing(self) -> tuple[str, ...]:
        """Third-party modules the engine needs that are not importable here."""
        return tuple(module for module in self.spec.requires if not is_installed(module))

    @property
    def usable(self) -> bool:
        """Its third-party dependencies are importable."""
        return not self.missing

    @property
    def implemented(self) -> bool:
        """Its factory module exists in the installed distribution (found without importing)."""
        return is_installed(self.spec.factory.partition(":")[0])


class EngineNotFoundError(ConfigError, LookupError):
    """No installed engine has the name the config asks for (a `LookupError` as before)."""


def installed_engines(role: Role | None = None) -> list[InstalledEngine]:
    """Every engine registered under `rl.engines`, sorted by (role, name)."""
    found = []
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        spec = entry_point.load()
        if not isinstance(spec, EngineSpec):
            raise TypeError(
                f"entry point {entry_point.name!r} = {entry_point.value!r} in group "
                f"{ENTRY_POINT_GROUP!r} must point at an rl.core.registry.EngineSpec, "
                f"got {type(spec).__name__}"
            )
        dist = entry_point.dist
        found.append(
            InstalledEngine(spec, dist.name if dist else "?", dist.version if dist else "?")
        )
    found.sort(key=lambda engine: (engine.spec.role, engine.spec.name))
    return [engine for engine in found if role is None or engine.spec.role == role]


def _named(key: str | None, name: str) -> str:
    """The message prefix naming the config key that chose the engine, if known."""
    return f"{key} = {name!r}: " if key else ""


def find_engine(name: str, role: Role, key: str | None = None) -> InstalledEngine:
    """The installed engine `name` of `role`; the error says what is installed and how to add it.

    `key` is the config key that names the engine (`actor.strategy`), for the message.
    """
    engines = installed_engines(role)
    for engine in engines:
        if engine.spec.name == name:
            return engine
    installed = ", ".join(e.spec.name for e in engines) or "none"
    hint = (
        f" Install it with: pip install '{KNOWN_ENGINES[name]}'." if name in KNOWN_ENGINES else ""
    )
    raise EngineNotFoundError(
        f"{_named(key, name)}no {role} engine named {name!r} is installed "
        f"(installed: {installed}).{hint}"
    )


def check_engine(name: str, role: Role, key: str | None = None) -> InstalledEngine:
    """The engine `name` of `role` if it can be built here, found without importing it.

    Raises `EngineNotFoundError` (not installed), `ConfigError` (registered, but its
    distribution does not provide it) or `MissingDependencyError` (it needs a package).
    """
    engine = find_engine(name, role, key)
    if not engine.implemented:
        module = engine.spec.factory.partition(":")[0]
        raise ConfigError(
            f"{_named(key, name)}{engine.distribution} {engine.version} registers the {name} "
            f"{role} engine but does not provide it ({module} is missing); choose another "
            f"{role} engine or upgrade {engine.distribution}"
        )
    if engine.missing:
        raise MissingDependencyError(
            f"{_named(key, name)}the {name} {role} engine needs {', '.join(engine.missing)}: "
            f"pip install '{engine.spec.install or engine.distribution}'"
        )
    return engine


def load_engine_class(name: str, role: Role, key: str | None = None) -> Any:
    """Import and return the class of engine `name`, checking it first (`check_engine`)
    and then against the contract it declares (`rl.core.engine_contract.check_contract`:
    an engine that does not meet it is refused here, once, not mid-run)."""
    from rl.core.engine_contract import check_contract

    engine = check_engine(name, role, key)
    module_name, _, attribute = engine.spec.factory.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        raise MissingDependencyError(
            f"{_named(key, name)}{engine.distribution} {engine.version} registers the {name} "
            f"{role} engine as {engine.spec.factory}, which does not import ({error}); "
            f"upgrade {engine.distribution}"
        ) from error
    cls = getattr(module, attribute)
    label = f"the {name} {role} engine ({engine.distribution} {engine.version})"
    check_contract(cls, role, label)
    return cls
