"""A dialect as one typed record: what `convert`, `detect`, the docs and the coverage test
read of a system rl takes configs from. Each dialect module builds its `Dialect` (verl's
in `verl`, ROLL's in `roll`, ...) and `registry` lists them by name.

A dialect has a key table (`Table`: the rules, the reasons a key that moved to a name our
schema lacks is not taken over, and what the docs say of it), the reader of its config
files (`compose`), what the system does to the values before it reads them (`rewrites`,
`switches`), its own rules of consistency (`check`), the reader of its launch scripts
(`scripts.LaunchReader`), and the other kinds of config the same system runs under another
command (`Variant`: verl's SFT and generation configs)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rl.cli.dialects.mapping import Rule
from rl.cli.dialects.scripts import LaunchReader
from rl.cli.dialects.switches import Switch

Job = Literal["train", "sft", "generate"]  # the rl command that runs a converted config
# the composed values of a file with its overrides (an unset `???` may stay "???")
Compose = Callable[[Path, Sequence[str]], dict[str, Any]]
# what the system does to its values before reading them, in place: report notes
Rewrite = Callable[[dict[str, Any]], list[str]]
# the system's rules of consistency: report notes, ConfigError on inconsistent values
Check = Callable[[dict[str, Any]], list[str]]


@dataclass(frozen=True)
class Table:
    """One key table: `rules` (first match wins) and `reasons` (why a key that moved to a
    name our schema lacks is not taken over). `name` names the list of the system's
    documented keys (`documented/<name>.txt`), `documented` says in words what it holds
    ("" when there is none: the table is then neither covered nor in the docs)."""

    name: str
    rules: Sequence[Rule]
    reasons: Sequence[Rule] = ()
    title: str = ""  # the docs' section heading; the name when empty
    description: str = ""
    documented: str = ""


@dataclass(frozen=True)
class Variant:
    """Another kind of config of the same system, told apart by its composed values: its
    own table, run by another rl command, with a note for the report."""

    table: Table
    job: Job
    applies: Callable[[Mapping[str, Any]], bool]
    note: str


@dataclass(frozen=True)
class Dialect:
    name: str  # as `--from` takes it
    table: Table
    compose: Compose
    check: Check
    rewrites: tuple[Rewrite, ...] = ()
    switches: tuple[Switch, ...] = ()  # sections not read while their switch is off
    launch: LaunchReader | None = None  # None: rl does not read its launch scripts
    variants: tuple[Variant, ...] = ()  # tried in order, the last that applies wins

    @property
    def tables(self) -> tuple[Table, ...]:
        return (self.table, *(variant.table for variant in self.variants))
