"""`docs/config-dialects.md` from the dialect tables themselves (a test keeps the file in
sync): `python -m rl.core.config.dialects.docs > docs/config-dialects.md`."""

from __future__ import annotations

from collections import Counter
from types import ModuleType

from rl.core.config.dialects import coverage
from rl.core.config.dialects.mapping import NO_SETTING, Rule

HEADER = """# Config dialects: running verl, ROLL, ChatLearn and RLinf configs

Generated from the importers' tables (`rl.core.config.dialects`) by
`python -m rl.core.config.dialects.docs`; a test fails when this file is stale.

`rl convert [--from DIALECT] FILE [OVERRIDES...] [-o OUT.yaml]` prints our config and a
report of every upstream key: **mapped** (written to ours), **default** (equal to our
default, or unset upstream), **ignored** (upstream plumbing) or **unsupported** (with the
reason). `rl train --from DIALECT FILE [OVERRIDES...]` converts and runs. The dialect is
detected from the file when `--from` is left out. A key no rule names is moved as it is
and kept if our schema has it, else reported unsupported ("{no_setting}").

A launch script works too (`rl convert --from verl run_qwen2-7b_math.sh`): its
`python -m verl.trainer.main_ppo` command gives the config (`--config-path` /
`--config-name`, else verl's built-in `ppo_trainer`, read from an installed verl) and the
overrides; line continuations, bash arrays and `$VAR` / `${{VAR:-default}}` assigned in
the script are expanded (the script is read, never run); a variable it does not set is
reported by name, not guessed.
"""


def _rows(rules: list[Rule]) -> list[str]:
    lines = ["| upstream key | rl key | note |", "|---|---|---|"]
    for rule in rules:
        target = f"`{rule.target}`" if rule.target else "—"
        note = rule.reason or ("value converted" if rule.convert else "")
        if not rule.target:
            note = f"{rule.status}: {note}"
        lines.append(f"| `{rule.source}` | {target} | {note} |")
    return lines


def _coverage(dialect: str, importer: ModuleType) -> list[str]:
    rows = coverage.table(dialect, importer)
    counts = Counter(row.status for row in rows)
    lines = [
        f"\n### Coverage of {dialect}'s documented keys\n",
        f"{len(rows)} keys ({importer.DOCUMENTED}): "
        + ", ".join(f"{counts[s]} {s}" for s in ("mapped", "unsupported", "ignored"))
        + ". A mapped key whose value equals our default is reported as default.\n",
        "| upstream key | rl key | status / reason |",
        "|---|---|---|",
    ]
    for row in rows:
        target = f"`{row.target}`" if row.status == "mapped" else "—"
        note = row.status if row.status == "mapped" else f"{row.status}: {row.reason}"
        lines.append(f"| `{row.key}` | {target} | {note} |")
    return lines


def render() -> str:
    lines = [HEADER.format(no_setting=NO_SETTING)]
    for dialect in coverage.TABLES:
        importer = coverage.tables(dialect)
        title = "verl's SFT trainer" if dialect == "verl_sft" else dialect
        lines.append(f"\n## {title}\n")
        lines.append(importer.DESCRIPTION.strip() + "\n")
        lines.append(
            "Rules, first match wins (`.` ends a prefix, `*` is the rest of one segment, "
            "`**` one or more segments):\n"
        )
        lines += _rows(importer.RULES)
        lines.append(
            "\nWhy a key that would move to a name our schema lacks is not supported (first "
            'match; otherwise "' + NO_SETTING + '"):\n'
        )
        lines += _rows(importer.REASONS)
        lines += _coverage(dialect, importer)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(), end="")
