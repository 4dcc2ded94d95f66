"""The config a verl launch script runs: its `python3 -m verl.trainer.main_ppo
[--config-path=... --config-name=...] key=value ...` command (or an experimental or
recipe entry module of verl), read as bash would run it (`scripts.locate`), never executed.

`hydra_entry` finds the config file as Hydra does for that module: a relative
`--config-path` is read against the module's folder, and without `--config-name` its
`@hydra.main` default applies. The overrides the user passes after the script stand where
the command has `"$@"` (or `$*`), else after the script's own.
"""

from __future__ import annotations

from pathlib import Path

from rl.cli.dialects import hydra_entry
from rl.cli.dialects.bash_expand import Value
from rl.cli.dialects.scripts import (
    Launch,
    LaunchCommand,
    LaunchReader,
    hydra_arguments,
    refuse_missing,
)
from rl.core.config.errors import ConfigError


def _entry_at(words: list[Value]) -> int | None:
    located = hydra_entry.entry_in([w.text if not w.missing else "" for w in words])
    return None if located is None else located[0]


def _launch(command: LaunchCommand) -> Launch:
    script, found, shell = command.script, command.found, command.shell
    texts = [w.text if not w.missing else "" for w in found.words]
    located = hydra_entry.entry_in(texts)
    assert located is not None
    index, module = located
    file_word = texts[index] if texts[index - 1] not in ("-m", "--module") else None
    options, words = hydra_arguments(script, found.words[index + 1 :])
    # "$@" (or $*) read by the script placed them; else they follow the command's own
    overrides = words if "$@" in shell.read else [*words, *(Value(a) for a in command.arguments)]
    refuse_missing(script, overrides, options, shell.sourced)
    pythonpath = found.prefix.get("PYTHONPATH") or shell.variable("PYTHONPATH")
    cwd = None if found.cwd.missing else Path(found.cwd.text)
    search = hydra_entry.Search(
        cwd, [] if pythonpath is None or pythonpath.missing else pythonpath.text.split(":"), script
    )
    entry = hydra_entry.find(module, file_word, search)
    path, name = options.get("path"), options.get("name")
    try:
        config_file, note = hydra_entry.config_file(
            entry, path.text if path else None, name.text if name else None, search
        )
    except ConfigError as error:
        raise ConfigError(f"{script}: {error}") from None
    return Launch(config_file, [w.text for w in overrides if w.text], [f"launch script: {note}"])


LAUNCH = LaunchReader(
    entry_at=_entry_at,
    command="`python3 -m verl.trainer.main_ppo ...` command (nor another verl entry module)",
    launch=_launch,
    mentions=hydra_entry.mentions_entry,
)
