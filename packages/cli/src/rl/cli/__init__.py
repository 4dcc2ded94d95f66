"""rl-cli: the `rl` command."""

__version__ = "0.1.0"
