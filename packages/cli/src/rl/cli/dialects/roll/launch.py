"""The config a ROLL launch script runs: its `python examples/start_<kind>_pipeline.py
--config_path DIR --config_name NAME` command, read as bash would run it (`scripts.locate`),
never executed.

ROLL's entry scripts parse only those two options (argparse) and call Hydra's
`initialize(config_path=DIR)`, which Hydra resolves against the folder of the calling
script, then `compose(config_name=NAME)`: the config is `<entry script's folder>/DIR/
NAME.yaml`, the entry script being found from the folder the command runs in (ROLL's
checkout root, where its examples say to run `bash examples/<example>/run_*.sh`). When rl
runs from elsewhere, the script's own examples folder is used if it holds the config (the
examples name CONFIG_PATH=$(basename $(dirname $0)): their own folder). The entry takes no
overrides: rl's overrides after the script apply after the file.
"""

from __future__ import annotations

import re
from pathlib import Path

from rl.cli.dialects import scripts
from rl.cli.dialects.bash_expand import Value
from rl.core.config.errors import ConfigError

ENTRY = re.compile(r"(^|/)start_[a-z_]*pipeline\.py$")
RLVR_ENTRY = "start_rlvr_pipeline.py"
OPTIONS = {"--config_path": "path", "--config_name": "name"}
DEFAULT_NAME = "sppo_config"  # the entry's argparse defaults
DEFAULT_PATH = "config"


def _mentions_entry(text: str) -> bool:
    """Whether a script's text names one of ROLL's entry scripts (for `detect`)."""
    return re.search(r"start_[a-z_]*pipeline\.py", text) is not None


def _entry_at(words: list[Value]) -> int | None:
    for at, word in enumerate(words):
        if not word.missing and ENTRY.search(word.text):
            return at
    return None


def _launch(command: scripts.LaunchCommand) -> scripts.Launch:
    """The config file and overrides of ROLL's command (rl's after its file); ConfigError
    in one line when they cannot be known."""
    script, found, at = command.script, command.found, command.at
    entry = found.words[at].text
    options = _options(script, found.words[at + 1 :])
    scripts.refuse_missing(script, [], options, command.shell.sourced)
    if not entry.endswith(RLVR_ENTRY):
        raise ConfigError(
            f"{script}: it runs ROLL's {Path(entry).name}; rl reads ROLL's RLVR pipeline "
            f"({RLVR_ENTRY}) only: its agentic, distillation and other pipelines are not in rl"
        )
    path = options.get("path", Value(DEFAULT_PATH)).text
    name = options.get("name", Value(DEFAULT_NAME)).text
    run_from = Path(found.cwd.text) if not found.cwd.missing else (command.cwd or Path.cwd())
    tried = [(run_from / entry).parent / path]
    beside = script.resolve().parent.parent  # the examples folder the script sits in
    if Path(entry).parent.name == beside.name:
        tried.append(beside / path)
    for folder in tried:
        for suffix in (".yaml", ".yml"):
            config = (
                (folder / name).with_suffix(suffix)
                if not name.endswith((".yaml", ".yml"))
                else folder / name
            )
            if config.is_file():
                note = (
                    f"launch script: {entry} --config_path {path} --config_name {name} "
                    f"-> {config} (Hydra's config_path, relative to the entry script)"
                )
                return scripts.Launch(config, list(command.arguments), [note])
    raise ConfigError(
        f"{script}: its command runs {entry} with --config_path {path} --config_name {name}, "
        f"but no {name}.yaml is in {' nor '.join(str(f) for f in tried)}: run rl from ROLL's "
        "checkout root, as the script expects"
    )


def _options(script: Path, words: list[Value]) -> dict[str, Value]:
    """argparse's view of the entry's arguments: only --config_path and --config_name."""
    options, rest = scripts.option_values(words, OPTIONS)
    if rest:
        raise ConfigError(
            f"{script}: its python command passes {rest[0].text!r}, which ROLL's entry "
            "script does not accept (it takes --config_path and --config_name only)"
        )
    return options


LAUNCH = scripts.LaunchReader(
    entry_at=_entry_at,
    command="`python examples/start_rlvr_pipeline.py --config_path ... --config_name ...` command",
    launch=_launch,
    mentions=_mentions_entry,
)
