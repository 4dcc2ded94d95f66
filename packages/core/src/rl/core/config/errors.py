"""The one error type of configuration problems."""


class ConfigError(ValueError):
    """A bad key or value; the message names the key, the value and what is allowed."""
