"""`PlacementError`: a placement that cannot run, found before any worker starts."""

from __future__ import annotations

from rl.core.errors import ConfigError


class PlacementError(ConfigError):
    """A bad placement; the message names the roles, the devices and what is allowed."""
