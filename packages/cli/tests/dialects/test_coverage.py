"""Every key each system documents is covered by its importer's table: mapped to one of
our keys, or unsupported/ignored with a specific reason (never the catch-all)."""

from __future__ import annotations

import pytest

from rl.cli.dialects import DIALECTS, coverage
from rl.cli.dialects.mapping import NO_SETTING
from rl.cli.dialects.record import Dialect
from rl.cli.dialects.registry import documented_tables, find, registry

TABLES = [table for _, table in documented_tables()]


def test_every_dialect_has_its_record_and_documented_tables():
    assert tuple(registry()) == DIALECTS
    assert all(isinstance(record, Dialect) for record in registry().values())
    assert [t.name for t in TABLES] == ["verl", "verl_sft", "roll", "chatlearn", "rlinf"]


@pytest.mark.parametrize("table", TABLES, ids=lambda table: table.name)
def test_every_documented_key_is_mapped_or_has_a_reason(table):
    rows = coverage.rows(table)
    assert len(rows) > 50  # the key list is there and read
    uncovered = [row.key for row in rows if not row.covered]
    assert not uncovered, f"{table.name}: no rule explains {uncovered}"
    assert any(row.status == "mapped" for row in rows)


def test_a_key_no_rule_names_falls_to_the_catch_all():
    row = coverage.classify("not_a_section.some_key", find("verl").table)
    assert (row.status, row.reason, row.covered) == ("unsupported", NO_SETTING, False)
