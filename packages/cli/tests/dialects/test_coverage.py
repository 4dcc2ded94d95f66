"""Every key each system documents is covered by its importer's table: mapped to one of
our keys, or unsupported/ignored with a specific reason (never the catch-all)."""

from __future__ import annotations

import pytest

from rl.cli.dialects import IMPLEMENTED, coverage, module
from rl.cli.dialects.mapping import NO_SETTING


def test_every_implemented_dialect_has_its_tables():
    assert set(IMPLEMENTED) <= set(coverage.TABLES)


@pytest.mark.parametrize("dialect", coverage.TABLES)
def test_every_documented_key_is_mapped_or_has_a_reason(dialect):
    rows = coverage.table(dialect, coverage.tables(dialect))
    assert len(rows) > 50  # the key list is there and read
    uncovered = [row.key for row in rows if not row.covered]
    assert not uncovered, f"{dialect}: no rule explains {uncovered}"
    assert any(row.status == "mapped" for row in rows)


def test_a_key_no_rule_names_falls_to_the_catch_all():
    row = coverage.classify("not_a_section.some_key", module("verl"))
    assert (row.status, row.reason, row.covered) == ("unsupported", NO_SETTING, False)
