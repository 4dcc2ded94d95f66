"""Coverage of each system's documented keys by its importer's table, key by key: which of
our keys it becomes, or why it is not taken over. `documented/<dialect>.txt` lists the keys
(names only) of the system's reference configs; `docs.py` prints the table and a test
requires every key to be covered (mapped, or unsupported/ignored with a specific reason)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib import resources
from types import ModuleType

from rl.cli.dialects import schema_keys
from rl.cli.dialects.mapping import NO_SETTING

# every key table, by the name of its documented-keys list (verl has two: PPO and SFT)
TABLES = ("verl", "verl_sft", "roll", "chatlearn", "rlinf")


def tables(name: str) -> ModuleType:
    """The module holding table `name`'s RULES, REASONS, DESCRIPTION and DOCUMENTED."""
    return importlib.import_module(f"rl.cli.dialects.{name}")


@dataclass(frozen=True)
class Coverage:
    key: str
    status: str  # "mapped", "unsupported" or "ignored"
    target: str | None
    reason: str

    @property
    def covered(self) -> bool:
        return self.status == "mapped" or self.reason not in ("", NO_SETTING)


def documented_keys(dialect: str) -> list[str]:
    text = resources.files(__package__).joinpath("documented", f"{dialect}.txt").read_text()
    return [line.strip() for line in text.splitlines() if line.strip() and line[0] != "#"]


def classify(key: str, importer: ModuleType) -> Coverage:
    """What the importer's table does with `key`, whatever its value."""
    for rule in importer.RULES:
        target = rule.match(key)
        if target is None:
            continue
        if not target:
            return Coverage(key, rule.status, None, rule.reason)
        if schema_keys.settable(target):
            return Coverage(key, "mapped", target, "")
        why = next((r for r in importer.REASONS if r.match(key) is not None), None)
        if why is None:
            return Coverage(key, "unsupported", target, NO_SETTING)
        return Coverage(key, why.status, target, why.reason)
    return Coverage(key, "unsupported", None, NO_SETTING)


def table(dialect: str, importer: ModuleType) -> list[Coverage]:
    return [classify(key, importer) for key in documented_keys(dialect)]
