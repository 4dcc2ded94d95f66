"""Our role names, and the lookup that turns a seed system's role name into one of them.

Each dialect keeps its own table (name -> our role, or None for a role we do not run yet
with the reason); this module only knows how to read such a table and name the closest
valid key when a name is not in it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

from rl.core.placement.errors import PlacementError

ROLES = ("actor", "ref", "critic", "rollout", "reward")


def closest(name: str, known: Iterable[str]) -> str:
    """`; did you mean 'x'?` for the closest of `known`, or "" when nothing is close."""
    match = difflib.get_close_matches(name, list(known), n=1, cutoff=0.5)
    return f"; did you mean {match[0]!r}?" if match else ""


def check_role(role: str) -> str:
    """`role` itself when it is one of ours; PlacementError naming the closest otherwise."""
    if role not in ROLES:
        raise PlacementError(
            f"unknown role {role!r}{closest(role, ROLES)} (roles: {', '.join(ROLES)})"
        )
    return role


def lookup_role(
    name: str, table: Mapping[str, str], unsupported: Mapping[str, str], dialect: str
) -> str:
    """Our role for the `dialect` role `name`, through `table`.

    A name in `unsupported` (name -> why) is refused as "not supported yet"; any other
    unknown name is refused with the closest known name of that dialect.
    """
    if name in table:
        return table[name]
    if name in unsupported:
        raise PlacementError(f"{dialect} role {name!r} is not supported yet: {unsupported[name]}")
    known = sorted(table)
    raise PlacementError(
        f"unknown {dialect} role {name!r}{closest(name, known)} (known: {', '.join(known)})"
    )


def add_role(
    devices: dict[str, tuple[int, ...]],
    role: str,
    placed: tuple[int, ...],
    key: str,
    sources: dict[str, str],
) -> None:
    """Put `role` on `placed` (read from config key `key`); PlacementError if it is already placed.

    `sources` remembers which key placed each role, so the error names both keys.
    """
    if role in devices:
        raise PlacementError(
            f"role {role!r} is placed twice: by {sources[role]!r} on {list(devices[role])} "
            f"and by {key!r} on {list(placed)}"
        )
    devices[role] = placed
    sources[role] = key
