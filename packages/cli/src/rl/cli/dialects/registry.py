"""Every dialect rl reads, by name: each one's `record.Dialect`, imported when first asked
for (`DIALECTS` names them without importing any)."""

from __future__ import annotations

from functools import cache

from rl.cli.dialects.record import Dialect, Table
from rl.core.config.errors import ConfigError

DIALECTS = ("verl", "roll", "chatlearn", "rlinf")


@cache
def registry() -> dict[str, Dialect]:
    """The dialects by name, in the order of `DIALECTS`."""
    from rl.cli.dialects.chatlearn import CHATLEARN
    from rl.cli.dialects.rlinf import RLINF
    from rl.cli.dialects.roll import ROLL
    from rl.cli.dialects.verl import VERL

    records = {record.name: record for record in (VERL, ROLL, CHATLEARN, RLINF)}
    assert tuple(records) == DIALECTS
    return records


def find(name: str) -> Dialect:
    """The dialect `name` (as `--from` takes it); ConfigError for an unknown one."""
    if name not in DIALECTS:
        raise ConfigError(f"--from {name!r}: unknown dialect; known: {', '.join(DIALECTS)}")
    return registry()[name]


def documented_tables() -> list[tuple[Dialect, Table]]:
    """Every key table with a list of the system's documented keys, with its dialect."""
    return [
        (dialect, table)
        for dialect in registry().values()
        for table in dialect.tables
        if table.documented
    ]
