"""The config a ChatLearn launch script runs: its `python chatlearn/entrypoint.py grpo
--config-file FILE key=value ...` command, read as bash would run it (`scripts.locate`),
never executed.

ChatLearn's entry point (`chatlearn/entrypoint.py`) takes the algorithm name, then
`--config-file`, which it opens with `OmegaConf.load` as given, so relative to the folder the
command runs in (the scripts `cd` nowhere and run from the ChatLearn checkout: they set
`CHATLEARN=$(pwd)` and `source scripts/base_env.sh`); everything after it is the override
dotlist. The overrides rl is given after the script follow the script's own. A value the
command needs that only the sourced env file sets (base_env.sh's `num_device`, from the GPUs
it counts with python) is refused in one line naming what to export or pass.
"""

from __future__ import annotations

from pathlib import Path

from rl.cli.dialects.bash_expand import Value
from rl.cli.dialects.scripts import (
    Launch,
    LaunchCommand,
    LaunchReader,
    option_values,
    refuse_missing,
)
from rl.core.config.errors import ConfigError

ENTRY = "entrypoint.py"
ALGORITHMS = ("grpo",)  # ChatLearn's ALGO_REGISTRY


def _mentions_entry(text: str) -> bool:
    """Whether a script's text names ChatLearn's entry point (for `detect`)."""
    return "chatlearn/entrypoint.py" in text


def _entry_at(words: list[Value]) -> int | None:
    for at, word in enumerate(words):
        if not word.missing and Path(word.text).name == ENTRY and "chatlearn" in word.text:
            return at
    return None


def _launch(command: LaunchCommand) -> Launch:
    """The config file and overrides of ChatLearn's command; ConfigError in one line."""
    script, found = command.script, command.found
    words = found.words[command.at + 1 :]
    algorithm = words[0].text if words else ""
    if algorithm not in ALGORITHMS:
        raise ConfigError(
            f"{script}: its ChatLearn command (line {found.line}) runs {algorithm or 'nothing'!r}; "
            f"rl reads ChatLearn's {', '.join(ALGORITHMS)}"
        )
    options, overrides = option_values(words[1:], {"--config-file": "file"})
    for word in overrides:
        if word.text.startswith("-") and not word.missing:
            raise ConfigError(
                f"{script}: its ChatLearn command passes {word.text}, which rl does not follow "
                "(it reads --config-file and key=value overrides): remove it"
            )
    overrides += [Value(a) for a in command.arguments]
    refuse_missing(script, overrides, options, command.shell.sourced)
    if "file" not in options:
        raise ConfigError(
            f"{script}: its ChatLearn command (line {found.line}) has no --config-file; "
            "ChatLearn then runs its dataclass defaults alone, which rl does not: pass a file"
        )
    config_file = _config_file(script, options["file"].text, found.cwd)
    note = f"launch script: runs {config_file} (ChatLearn's --config-file, from {found.cwd.text})"
    return Launch(config_file, [w.text for w in overrides if w.text], [note])


def _config_file(script: Path, given: str, cwd: Value) -> Path:
    """`--config-file` as OmegaConf.load opens it: relative to where the command runs."""
    path = Path(given)
    if not path.is_absolute():
        if cwd.missing:
            raise ConfigError(
                f"{script}: --config-file {given} is relative to the folder its command runs "
                "in, which rl cannot know here: run rl from the ChatLearn checkout"
            )
        path = Path(cwd.text) / path
    if not path.is_file():
        raise ConfigError(
            f"{script}: --config-file {given} is not a file from {cwd.text} (ChatLearn opens it "
            "relative to the folder the script runs in: run rl from the ChatLearn checkout, "
            "where the script's `source scripts/base_env.sh` also is)"
        )
    return path


LAUNCH = LaunchReader(
    entry_at=_entry_at,
    command="`python chatlearn/entrypoint.py grpo --config-file FILE ...` command",
    launch=_launch,
    mentions=_mentions_entry,
)
