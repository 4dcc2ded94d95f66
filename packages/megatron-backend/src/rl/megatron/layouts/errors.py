"""The one error a weight layout conversion raises.

Every message names the tensor at fault (and, where it helps, the architecture,
the expected and actual shape, or the missing parts), so a bad checkpoint or a
converter table that does not fit the model is found from the message alone.
"""

from __future__ import annotations

from rl.core.errors import UserError


class LayoutError(UserError, ValueError):
    """A tensor that does not fit the layout table: unknown name, bad shape, bad TP size."""
