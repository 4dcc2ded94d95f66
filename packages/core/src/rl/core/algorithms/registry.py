"""Name -> implementation registries, so every algorithm is selectable from config by name.

One `Registry` per kind (advantage estimators, policy losses, loss aggregation modes,
KL estimators, KL controllers). Registering a name twice is an error, and asking for
an unknown name raises `ValueError` naming the config key, the value and the sorted
valid names — the message a user sees for a typo in their YAML.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """A named set of implementations of one kind.

    Args:
        kind: what is registered, in words ("advantage estimator").
        config_key: the config key whose value selects one ("algorithm.adv_estimator").
    """

    def __init__(self, kind: str, config_key: str) -> None:
        self.kind = kind
        self.config_key = config_key
        self._items: dict[str, T] = {}

    def register(self, *names: str) -> Callable[[T], T]:
        """Decorator adding an implementation under one or more names (aliases)."""
        if not names:
            raise ValueError(f"registering a {self.kind} needs at least one name")

        def add(item: T) -> T:
            for name in names:
                if name in self._items:
                    raise ValueError(f"{self.kind} {name!r} is already registered")
                self._items[name] = item
            return item

        return add

    def get(self, name: str, key: str | None = None) -> T:
        """The implementation registered as `name`; ValueError listing valid names if none.

        `key` names the config key holding `name` in that message, for a registry that
        serves several keys (`critic.loss_agg_mode`); default: the registry's `config_key`.
        """
        try:
            return self._items[name]
        except KeyError:
            raise ValueError(
                f"{key or self.config_key} = {name!r} is not a known {self.kind}; "
                f"valid: {', '.join(self.names())}"
            ) from None

    def names(self) -> list[str]:
        """All registered names (aliases included), sorted."""
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items
