"""Name -> function registries, so every algorithm is selectable from config."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

F = TypeVar("F")


class Registry(Generic[F]):
    """A named set of functions; an unknown name lists the valid ones."""

    def __init__(self, kind: str, config_key: str) -> None:
        self.kind, self.config_key = kind, config_key
        self._items: dict[str, F] = {}

    def register(self, *names: str) -> Callable[[F], F]:
        def add(fn: F) -> F:
            for name in names:
                if name in self._items:
                    raise ValueError(f"{self.kind} {name!r} is already registered")
                self._items[name] = fn
            return fn

        return add

    def get(self, name: str) -> F:
        try:
            return self._items[name]
        except KeyError:
            raise ValueError(
                f"{self.config_key} = {name!r} is not a known {self.kind}; "
                f"valid: {', '.join(sorted(self._items))}"
            ) from None

    def names(self) -> list[str]:
        return sorted(self._items)
