"""Checking an engine class against the contract it declares, once, when it is loaded.

An engine class names its contract (`TrainEngine` or `RolloutEngine`) and the optional
abilities it has (`Offloading`, `ExportsHF`, ...; `rl.core.engines.CAPABILITIES`) among its
bases. `check_contract` verifies that every member of each is defined by the class itself
(not left to the protocol's empty body), and callers then ask `declares(engine,
Capability)` — a fact the class stated — instead of probing the object for members.
"""

from __future__ import annotations

import inspect
from functools import cache
from typing import Any

from rl.core.engines import CAPABILITIES, CONTRACTS
from rl.core.errors import ConfigError

_PROTOCOLS = frozenset(CONTRACTS.values()) | {c for caps in CAPABILITIES.values() for c in caps}


class EngineContractError(ConfigError):
    """An engine class that does not meet the contract it declares (a backend's bug, found
    when the engine is loaded rather than mid-run)."""


def members(protocol: type) -> tuple[str, ...]:
    """The names a protocol declares: its methods, class methods and properties."""
    return tuple(
        name
        for name, value in vars(protocol).items()
        if not name.startswith("_")
        and (inspect.isfunction(value) or isinstance(value, (classmethod, property)))
    )


def declared(cls: type) -> tuple[type, ...]:
    """The contract and abilities `cls` names among its bases, in MRO order."""
    return tuple(base for base in cls.__mro__ if base in _PROTOCOLS)


def declares(engine: Any, protocol: type) -> bool:
    """Whether the engine (or engine class) declared `protocol`."""
    cls = engine if isinstance(engine, type) else type(engine)
    return protocol in cls.__mro__


def callable_members(cls: type) -> frozenset[str]:
    """Every member a caller may use on an engine of `cls`: those of what it declared."""
    return frozenset(name for protocol in declared(cls) for name in members(protocol))


@cache
def check_contract(cls: type, role: str, label: str = "") -> None:
    """Check that `cls` declares `role`'s contract, only abilities of that role, and
    defines every member of each; `label` names the engine in the error (e.g. "the fsdp
    train engine (rl-fsdp 0.1.0)")."""
    name = label or f"{cls.__module__}.{cls.__qualname__}"
    contract = CONTRACTS[role]
    if contract not in cls.__mro__:
        raise EngineContractError(
            f"{name}: {cls.__qualname__} does not declare rl.core.engines.{contract.__name__} "
            "among its bases (the contract every engine of this role meets)"
        )
    foreign = [
        p.__name__ for p in declared(cls) if p is not contract and p not in CAPABILITIES[role]
    ]
    if foreign:
        raise EngineContractError(
            f"{name}: {cls.__qualname__} declares {', '.join(foreign)}, which {role} engines "
            f"do not have (theirs: {', '.join(p.__name__ for p in CAPABILITIES[role])})"
        )
    for protocol in declared(cls):
        missing = [m for m in members(protocol) if _owner(cls, m) in _PROTOCOLS]
        if missing:
            raise EngineContractError(
                f"{name}: {cls.__qualname__} declares {protocol.__name__} but does not define "
                f"{', '.join(missing)}"
            )


def _owner(cls: type, name: str) -> type | None:
    """The class in `cls`'s MRO that defines `name`."""
    return next((base for base in cls.__mro__ if name in vars(base)), None)
