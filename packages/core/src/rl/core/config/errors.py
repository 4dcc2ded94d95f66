"""The one error type of configuration problems (defined with the other user errors)."""

from rl.core.errors import ConfigError

__all__ = ["ConfigError"]
