"""`docs/config-dialects.md` from the dialect tables themselves (a test keeps the file in
sync): `python -m rl.core.config.dialects.docs > docs/config-dialects.md`."""

from __future__ import annotations

from rl.core.config.dialects import DIALECTS, IMPLEMENTED
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


def render() -> str:
    from rl.core.config.dialects import verl

    lines = [HEADER.format(no_setting=NO_SETTING)]
    lines.append("## verl\n")
    lines.append(
        "Composed by Hydra (defaults lists, `group@package: option`, `_self_`, relative "
        "`../group`, `hydra.searchpath`) with verl's override syntax (`key=v`, `+key=v`, "
        "`~key`, `++key=v`); OmegaConf resolves `${oc.select:...}`, relative `${.key}` and "
        "refuses an unset `???`. Rules, first match wins (`.` ends a prefix, `*` is the rest "
        "of one segment, `**` one or more segments):\n"
    )
    lines += _rows(verl.RULES)
    lines.append(
        "\nWhy a key that would move to a name our schema lacks is not supported (first "
        'match; otherwise "' + NO_SETTING + '"):\n'
    )
    lines += _rows(verl.REASONS)
    for dialect in DIALECTS:
        if dialect not in IMPLEMENTED:
            lines.append(f"\n## {dialect}\n\nDetected, not converted yet.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(), end="")
