"""Every upstream example config and launch script committed under
`dialects/<system>/upstream/` converts with nothing refused but the settings that
docs/config-dialects.md lists (`rl.cli.dialects.docs.EXAMPLE_REFUSALS`), and each row of that
table is still met by some example (a row nothing needs any more goes)."""

from __future__ import annotations

from fnmatch import fnmatchcase

from count_refusals import examples, where_it_runs  # scripts/, on the path (root conftest)

from rl.cli.dialects import convert
from rl.cli.dialects.docs import EXAMPLE_REFUSALS


def test_the_examples_refuse_only_what_the_docs_table_lists(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))  # the scripts' ~ paths: nothing of the user's
    unlisted, met = [], set()
    converted = 0
    for system, path in examples():
        try:
            with where_it_runs(system, path):
                report = convert(system, path).report
        except Exception:  # needs user values, or refused as a whole (tested per dialect)
            continue
        converted += 1
        for entry in report.refused():
            rows = [
                index
                for index, (owner, patterns, _) in enumerate(EXAMPLE_REFUSALS)
                if owner == system and any(fnmatchcase(entry.source, p) for p in patterns)
            ]
            met.update(rows)
            if not rows:
                unlisted.append(f"{path.name}: {entry.source} = {entry.value!r}")
    assert converted >= 35  # of 61: the rest need user values (each dialect tests why)
    assert unlisted == []
    assert met == set(range(len(EXAMPLE_REFUSALS))), "a docs row no example needs any more"
