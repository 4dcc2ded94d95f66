"""No silent change of meaning: an upstream setting that would change what is trained and
that rl cannot honour (a report entry "unsupported") stops the run, unless the user names it
in `--allow-unsupported KEY[,KEY]` (shell-style patterns: `rewards.*`, `*` for all). The
settings a run goes without are recorded in its config (`trainer.dropped_settings`, so
`config.yaml` keeps them) and printed when it starts."""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase

from rl.cli.dialects.report import Entry, Report
from rl.core.config.errors import ConfigError

FLAG = "--allow-unsupported"


def patterns(values: Sequence[str] | None) -> list[str]:
    """The keys (or patterns) of each `--allow-unsupported` value, commas split."""
    return [part.strip() for value in values or () for part in value.split(",") if part.strip()]


def settle(report: Report, allowed: Sequence[str] = ()) -> dict[str, str]:
    """The dropped settings (`dialect:key` -> value and reason) when every refused key of
    `report` is allowed; ConfigError naming each one that is not, one line per key. A
    pattern that matches no refused key is refused too (a typo must not pass unnoticed)."""
    refused = report.refused()
    unused = [p for p in allowed if not any(fnmatchcase(e.source, p) for e in refused)]
    if unused:
        names = ", ".join(e.source for e in refused) or "none"
        raise ConfigError(
            f"{FLAG} {','.join(unused)}: no refused {report.dialect} setting of this config "
            f"matches (the refused ones: {names})"
        )
    left = [e for e in refused if not any(fnmatchcase(e.source, p) for p in allowed)]
    if left:
        raise ConfigError(_refusal(report.dialect, left))
    report.dropped = refused
    return {f"{report.dialect}:{e.source}": _what(e) for e in refused}


def _refusal(dialect: str, entries: list[Entry]) -> str:
    """One line: the keys and values (the report above gives each one's reason)."""
    named = ", ".join(f"{e.source} = {e.value!r}" for e in entries)
    keys = ",".join(e.source for e in entries)
    return (
        f"{len(entries)} {dialect} setting(s) would change what is trained and rl cannot "
        f"honour them (the report lists each with the reason): {named}; remove them, or pass "
        f"{FLAG} {keys} to train without them (recorded in the run's config.yaml as "
        "trainer.dropped_settings)"
    )


def _what(entry: Entry) -> str:
    return f"{entry.value!r} ({entry.reason or 'rl has no such setting'})"
