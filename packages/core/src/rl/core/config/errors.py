"""Configuration errors: `ConfigError` (defined with the other user errors) and `FieldError`,
a bad value of one field named relative to its section until `from_dict` adds the path."""

from __future__ import annotations

from typing import Any

from rl.core.errors import ConfigError

__all__ = ["ConfigError", "FieldError"]


class FieldError(ConfigError):
    """`key = value is not allowed: allowed`, with `key` relative to the dataclass checked.

    A section's `__post_init__` knows only its own field names (`OptimConfig` is both
    `actor.optim` and `critic.optim`); `convert.from_dict` re-raises the error
    `within` the section's path, so the user reads the full key.
    """

    def __init__(self, key: str, value: Any, allowed: str) -> None:
        self.key, self.value, self.allowed = key, value, allowed
        super().__init__(f"{key} = {value!r} is not allowed: {allowed}")

    def within(self, section: str) -> FieldError:
        """The same error with `key` prefixed by the dotted `section` path ("" keeps it)."""
        key = f"{section}.{self.key}" if section else self.key
        return FieldError(key, self.value, self.allowed)

    def __reduce__(self) -> tuple[Any, ...]:
        return (FieldError, (self.key, self.value, self.allowed))
