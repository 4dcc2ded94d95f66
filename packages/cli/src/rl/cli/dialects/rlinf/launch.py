"""The config an RLinf launch script runs: its `python .../examples/reasoning/main_grpo.py
--config-path DIR --config-name NAME` command, read as bash would run it, never executed.

RLinf's entry points declare `@hydra.main(version_base="1.1")` with neither a config path
nor a name: the command line gives both. A relative `--config-path` is relative to the
entry file's folder (Hydra's rule for the path `hydra.main` would hold), the name is the
file's stem. RLinf's scripts take the config name as their first argument
(`CONFIG_NAME=$1`, a default when `[ -z "$1" ]`); the words rl is given after the script
that are not overrides (no `=`) are those arguments, the others are overrides and follow
the command's own (RLinf's scripts pass none).
"""

from __future__ import annotations

import re
from pathlib import Path

from rl.cli.dialects import scripts
from rl.cli.dialects.bash_expand import Value
from rl.core.config.errors import ConfigError

# RLinf's entry scripts, and what runs under each
ENTRIES = {
    "main_grpo.py": "reasoning",  # examples/reasoning: math GRPO / PPO / Reinforce++
    "main_rstar2.py": "agent",  # examples/agent/rstar2: read, then refused as agentic
}
_MENTION = re.compile(r"\bmain_(grpo|rstar2|embodied|sft|\w+_agent)\.py\b")


def _mentions_entry(text: str) -> bool:
    """Whether a script's text runs one of RLinf's example entry files (for `detect`)."""
    return _MENTION.search(text) is not None and "--config-name" in text


def _entry_at(words: list[Value]) -> int | None:
    for at, word in enumerate(words[1:], 1):
        name = Path(word.text).name
        if _MENTION.fullmatch(name) and Path(words[at - 1].text).name.startswith("python"):
            return at
    return None


def _script_arguments(arguments: list[str]) -> tuple[list[str], list[str]]:
    """(the script's own arguments: the leading words that are no overrides, e.g. the
    config name; rl's overrides)."""
    own = list(arguments)
    positional: list[str] = []
    while own and "=" not in own[0] and not own[0].startswith("-"):
        positional.append(own.pop(0))
    return positional, own


def _launch(command: scripts.LaunchCommand) -> scripts.Launch:
    """The config file and overrides of RLinf's command. ConfigError, one line."""
    script, found, at = command.script, command.found, command.at
    entry = found.words[at]
    name = Path(entry.text).name
    if name not in ENTRIES:
        raise ConfigError(
            f"{script}: it runs RLinf's {name}, whose runner rl has no counterpart for; rl "
            "converts the reasoning runner of examples/reasoning/main_grpo.py"
        )
    options, words = scripts.hydra_arguments(script, found.words[at + 1 :])
    overrides = [*words, *(Value(a) for a in command.arguments)]
    scripts.refuse_missing(script, overrides, options, command.shell.sourced)
    if entry.missing:
        raise ConfigError(f"{script}: the path of {name} uses {entry.missing[0].what}")
    if "name" not in options:
        raise ConfigError(
            f"{script}: its command gives no --config-name, and RLinf's {name} names none "
            "in @hydra.main: pass the config file to rl instead"
        )
    base = Path(entry.text).parent
    if not base.is_absolute() and not found.cwd.missing:
        base = Path(found.cwd.text) / base
    folder = Path(options["path"].text) if "path" in options else Path()
    if not folder.is_absolute():
        folder = base / folder
    stem = options["name"].text
    config_file = folder / (stem if stem.endswith(".yaml") else f"{stem}.yaml")
    if not config_file.is_file():
        raise ConfigError(
            f"{script}: its command runs --config-name {stem} from {folder}, and there is no "
            f"{config_file.name} there (RLinf's example configs: examples/reasoning/config/math)"
        )
    note = f"launch script: RLinf's {name} with {config_file} (--config-path, --config-name)"
    return scripts.Launch(config_file, [w.text for w in overrides if w.text], [note])


LAUNCH = scripts.LaunchReader(
    entry_at=_entry_at,
    command="`python .../main_grpo.py --config-path DIR --config-name NAME` command",
    launch=_launch,
    mentions=_mentions_entry,
    split=_script_arguments,
)
