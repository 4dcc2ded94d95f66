"""Coverage of each system's documented keys by its importer's table, key by key: which of
our keys it becomes, or why it is not taken over. `documented/<table>.txt` lists the keys
(names only) of the system's reference configs; `docs.py` prints the table and a test
requires every key to be covered (mapped, or unsupported/ignored with a specific reason)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

from rl.cli.dialects import schema_keys
from rl.cli.dialects.mapping import NO_SETTING
from rl.cli.dialects.record import Table


@dataclass(frozen=True)
class Coverage:
    key: str
    status: str  # "mapped", "unsupported" or "ignored"
    target: str | None
    reason: str

    @property
    def covered(self) -> bool:
        return self.status == "mapped" or self.reason not in ("", NO_SETTING)


def documented_keys(table: Table) -> list[str]:
    """The keys of `documented/<table.name>.txt` (every key table of a dialect with
    documented keys has one: `registry.documented_tables`)."""
    text = resources.files(__package__).joinpath("documented", f"{table.name}.txt").read_text()
    return [line.strip() for line in text.splitlines() if line.strip() and line[0] != "#"]


def classify(key: str, table: Table) -> Coverage:
    """What the key table does with `key`, whatever its value."""
    for rule in table.rules:
        target = rule.match(key)
        if target is None:
            continue
        if not target:
            return Coverage(key, rule.status, None, rule.reason)
        if schema_keys.settable(target):
            return Coverage(key, "mapped", target, "")
        why = next((r for r in table.reasons if r.match(key) is not None), None)
        if why is None:
            return Coverage(key, "unsupported", target, NO_SETTING)
        return Coverage(key, why.status, target, why.reason)
    return Coverage(key, "unsupported", None, NO_SETTING)


def rows(table: Table) -> list[Coverage]:
    return [classify(key, table) for key in documented_keys(table)]
