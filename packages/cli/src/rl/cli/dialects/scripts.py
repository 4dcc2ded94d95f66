"""The launch scripts of the systems rl reads, read as bash would run them, never executed:
each system's `LaunchReader` finds its python command in a script (`locate`) and says
which config file and overrides that command runs (verl's: `verl_launch`).

`bash_run` reads the script in order (variables it assigns, else from the environment,
`${X:-default}` and friends, `$( )` of pwd/date/basename/dirname/realpath/nproc, `$(( ))`,
arrays, `if`/`case` decided from what is known). The overrides the user passes after the
script stand where the command has `"$@"` (or `$*`), else after the script's own. A value
the command needs but that cannot be known (a variable set nowhere, a command rl does not
run) is refused in one line that names it, the override it feeds, and what to do.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from rl.cli.dialects.bash_expand import Missing, Value
from rl.cli.dialects.bash_run import Found, Shell, find_launch
from rl.core.config.errors import ConfigError

HYDRA_OPTIONS = {"--config-path": "path", "-cp": "path", "--config-name": "name", "-cn": "name"}


@dataclass
class Launch:
    """What the script's python command runs: the config file and the overrides in order
    (the user's included), with notes for the report."""

    config_file: Path
    overrides: list[str]
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class LaunchCommand:
    """A script's launch command as `locate` found it: `at` is the index of the word that
    names the system's entry point, `arguments` are rl's words after the script that the
    command takes as overrides, `cwd` the folder rl was given (None: the current one)."""

    script: Path
    found: Found
    shell: Shell
    at: int
    arguments: list[str]
    cwd: Path | None


def _to_script_and_command(arguments: list[str]) -> tuple[list[str], list[str]]:
    return arguments, arguments


@dataclass(frozen=True)
class LaunchReader:
    """How one system's launch scripts are read: `entry_at` finds the word of a command
    that names the system's entry point (None: not a launch command), `command` says in
    words what the script should hold, `launch` gives the config file and overrides of the
    command found, `mentions` tells from a script's text whether it names the entry point
    (for `detect`). `split` parts rl's words after the script into the script's own
    arguments (`$1`, ...) and the overrides (by default all are both)."""

    entry_at: Callable[[list[Value]], int | None]
    command: str
    launch: Callable[[LaunchCommand], Launch]
    mentions: Callable[[str], bool]
    split: Callable[[list[str]], tuple[list[str], list[str]]] = _to_script_and_command

    def read(
        self,
        script: Path,
        arguments: Sequence[str] = (),
        environ: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        now: datetime | None = None,
    ) -> Launch:
        """The config file and overrides `script` runs when called with `arguments` (rl's
        words after the script), in the environment `environ` (this process's by default)
        from the folder `cwd` (the current one). ConfigError, one line."""
        given, overrides = self.split(list(arguments))
        found, shell = locate(
            script,
            given,
            lambda words: self.entry_at(words) is not None,
            self.command,
            environ,
            cwd,
            now,
        )
        at = self.entry_at(found.words)
        assert at is not None
        return self.launch(LaunchCommand(script, found, shell, at, overrides, cwd))


def locate(
    script: Path,
    arguments: Sequence[str],
    is_launch: Callable[[list[Value]], bool],
    command: str,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    now: datetime | None = None,
) -> tuple[Found, Shell]:
    """The launch command of `script` (the first whose words satisfy `is_launch`), read as
    bash would run it with `arguments`, and the shell state there; ConfigError (one line,
    naming `command`, what the script should hold) when there is none or it runs under a
    condition or loop rl cannot decide. Any system's launch script is read with this."""
    try:
        text = script.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{script} could not be read: {error}") from None
    try:
        found, shell = find_launch(
            text,
            str(script),
            list(arguments),
            os.environ if environ is None else environ,
            cwd or Path.cwd(),
            now or datetime.now(),
            is_launch,
        )
    except ConfigError as error:
        raise ConfigError(f"{script}: {error} (bash this reader does not follow)") from None
    if found is None:
        stop = f" (it exits at line {shell.exited} first)" if shell.exited else ""
        raise ConfigError(f"{script}: no {command} found in the script{stop}")
    if found.under is not None:
        fix = (
            "write one launch command per script"
            if "loop" in found.under.what
            else "export what it tests, or keep only the branch that runs"
        )
        raise ConfigError(
            f"{script}: its python command (line {found.line}) runs {found.under.what} "
            f"({found.under.why}), which rl cannot decide: {fix}"
        )
    return found, shell


def hydra_arguments(script: Path, words: list[Value]) -> tuple[dict[str, Value], list[Value]]:
    """Hydra's `--config-path`/`--config-name` (and short forms) apart from the overrides;
    ConfigError for another Hydra option or a word that is no override."""
    options, overrides = option_values(words, HYDRA_OPTIONS)
    for word in overrides:
        if word.text.startswith("-") and not word.missing:
            raise ConfigError(
                f"{script}: its python command passes {word.text}, a Hydra option rl does not "
                "follow (it reads --config-path and --config-name): remove it"
            )
    return options, overrides


def option_values(
    words: list[Value], names: Mapping[str, str]
) -> tuple[dict[str, Value], list[Value]]:
    """The options of a command's words that take a value (`--name=v` or `--name v`; `names`
    maps each spelling to its key) apart from the other words, kept in order."""
    options: dict[str, Value] = {}
    rest: list[Value] = []
    at = 0
    while at < len(words):
        word = words[at]
        option, has_value, value = word.text.partition("=")
        if option in names:
            if not has_value:
                at += 1
                word = words[at] if at < len(words) else Value("")
                value = word.text
            options[names[option]] = Value(value, word.missing)
        else:
            rest.append(word)
        at += 1
    return options, rest


def refuse_missing(
    script: Path, overrides: list[Value], options: dict[str, Value], sourced: list[str]
) -> None:
    """One line naming each value the command needs but rl cannot know, unless a later
    override of the same key (the user's) replaces it."""
    problems: list[str] = []
    keys: list[str] = []
    unknown: list[Missing] = []
    for kind, value in options.items():
        if value.missing:
            problems.append(f"--config-{kind} uses {_what(value.missing)}")
            unknown += value.missing
    for at, word in enumerate(overrides):
        if not word.missing:
            continue
        key = _key(word)
        later = [w for w in overrides[at + 1 :] if not w.missing and _key(w) == key]
        if later and "=" in word.text:
            prefix = word.text.split("=", 1)[0]
            overrides[at] = Value(f"{prefix}={later[-1].text.split('=', 1)[1]}")
            continue
        problems.append(f"{key} uses {_what(word.missing)}")
        keys.append(key)
        unknown += word.missing
    if not problems:
        return
    exportable = sorted({m.what.lstrip("$") for m in unknown if m.exportable})
    fixes = []
    if exportable:
        them = "them" if len(exportable) > 1 else "it"
        fixes.append(f"export {', '.join(exportable)} (bash reads {them} from the environment)")
    if keys:
        fixes.append(f"pass {' '.join(k + '=VALUE' for k in keys)} after the script")
    also = f" (the script sources {', '.join(sourced)}, which rl does not read)" if sourced else ""
    raise ConfigError(
        f"{script}: its python command needs values rl cannot know: {'; '.join(problems)}: "
        + (" or ".join(fixes) or "give the script those values")
        + also
    )


def _key(word: Value) -> str:
    return word.text.split("=", 1)[0].lstrip("+~")


def _what(missing: tuple[Missing, ...]) -> str:
    seen: dict[str, str] = {}
    for item in missing:
        seen.setdefault(item.what, item.why)
    return ", ".join(f"{what} ({why})" for what, why in seen.items())
