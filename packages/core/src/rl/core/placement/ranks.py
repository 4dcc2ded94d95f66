"""RLinf's rank-list grammar (`rlinf.scheduler.cluster.utils.parse_rank_config`), pure.

    ranks := "all" | item ("," item)*
    item  := int | int "-" int        (a range, both ends included)

OmegaConf reads a bare `0` as the int 0, so ints are accepted too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rl.core.placement.errors import PlacementError

_ITEM = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")
RANKS_FORMS = '"all", an int, "a-b" (a..b included), or a comma list of those ("0-1,4-5")'


def parse_ranks(value: object, n_devices: int, key: str) -> tuple[int, ...]:
    """The sorted device indices `value` names; `all` is every one of `n_devices`.

    `key` is the config key `value` was read from, for the error message. Indices beyond
    `n_devices` are kept (validation reports them with the roles they belong to).
    """
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise PlacementError(f"{key} = {value!r} is not allowed: {RANKS_FORMS}")
    if isinstance(value, int):
        if value < 0:
            raise PlacementError(f"{key} = {value!r} is not allowed: {RANKS_FORMS}")
        return (value,)
    if value.strip().lower() == "all":
        return tuple(range(n_devices))
    ranks: set[int] = set()
    for item in value.split(","):
        match = _ITEM.match(item)
        if match is None:
            raise PlacementError(f"{key} = {value!r} is not allowed: {RANKS_FORMS}")
        start = int(match.group(1))
        end = int(match.group(2)) if match.group(2) is not None else start
        if end < start:
            raise PlacementError(
                f"{key} = {value!r} is not allowed: range {item.strip()!r} ends before it starts"
            )
        ranks.update(range(start, end + 1))
    return tuple(sorted(ranks))


def format_ranks(devices: Sequence[int]) -> str:
    """Device indices as RLinf writes them, the inverse of `parse_ranks`: "0-3,6"."""
    runs: list[list[int]] = []
    for d in devices:
        if runs and d == runs[-1][-1] + 1:
            runs[-1].append(d)
        else:
            runs.append([d])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)
