"""The config a launch script runs: `python3 -m verl.trainer.main_ppo --config-path=...
--config-name=... key=value ...` found in a bash script, with its variables expanded.

Read, never executed: line continuations are joined, assignments (`VAR=value`,
`export VAR=...`, `VAR=${VAR:-default}`) and bash arrays (`args=( a b \\n c )`) are
recorded in script order, and `$VAR`, `${VAR}`, `${VAR:-default}` and `"${args[@]}"`
expand from them. A variable the script does not assign is not guessed (nor read from
this shell's environment): it is reported by name.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from rl.core.config.errors import ConfigError

ENTRY_POINTS = ("verl.trainer.main_ppo", "verl/trainer/main_ppo.py")
ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
QUOTED_ARRAY = re.compile(r'"\$\{([A-Za-z_][A-Za-z0-9_]*)\[@\]\}"')
ARRAY = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=\((.*)\)$", re.S)
VARIABLE = re.compile(
    r"\$\{([A-Za-z_][A-Za-z0-9_]*)\[@\]\}|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}"
    r"|\$([A-Za-z_][A-Za-z0-9_]*)"
)


@dataclass
class Launch:
    """What the script's python command runs."""

    config_dir: Path | None  # --config-path, relative to the script
    config_name: str  # --config-name (verl's default: ppo_trainer)
    overrides: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _statements(text: str) -> list[str]:
    """The script's logical lines: continuations joined, comments and blanks dropped,
    a multi-line array assignment kept whole."""
    joined = re.sub(r"\\\r?\n", " ", text)
    out: list[str] = []
    pending = ""
    for raw in joined.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        pending = f"{pending}\n{line}" if pending else line
        if pending.count("(") <= pending.count(")"):
            out.append(pending)
            pending = ""
    if pending:
        out.append(pending)
    return out


class _Scope:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.arrays: dict[str, list[str]] = {}

    def expand(self, text: str) -> str:
        text = QUOTED_ARRAY.sub(r"${\1[@]}", text)  # "${a[@]}" is one word per item

        def one(found: re.Match[str]) -> str:
            array, name, fallback, bare = found.groups()
            if array is not None:
                if array not in self.arrays:
                    return found.group(0)
                return " ".join(shlex.quote(item) for item in self.arrays[array])
            key = name or bare
            if key in self.values:
                return self.values[key]
            if fallback is not None:
                return self.expand(fallback)
            return found.group(0)  # left as it is: reported if the command uses it

        return VARIABLE.sub(one, text)


def parse_launch_script(path: Path) -> Launch:
    """The python command of the verl launch script `path` (ConfigError if none)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{path} could not be read: {error}") from None
    scope = _Scope()
    for statement in _statements(text):
        array = ARRAY.match(statement)
        if array:
            items = shlex.split(scope.expand(array.group(2)), comments=True)
            scope.arrays[array.group(1)] = items
            continue
        try:
            words = shlex.split(statement, comments=True)
        except ValueError:  # bash this reader does not follow (heredocs, $'...'): skipped
            continue
        if words and words[0] == "export":
            words = words[1:]
        assign = ASSIGN.match(words[0]) if len(words) == 1 else None
        if assign:
            scope.values[assign.group(1)] = scope.expand(assign.group(2))
            continue
        if any(entry in statement for entry in ENTRY_POINTS):
            try:
                return _launch(path, shlex.split(scope.expand(statement), comments=True))
            except ValueError as error:
                raise ConfigError(
                    f"{path}: its python command could not be read ({error}): {statement[:200]}"
                ) from None
    raise ConfigError(
        f"{path}: no `python -m verl.trainer.main_ppo ...` command found in the script"
    )


def _launch(path: Path, words: list[str]) -> Launch:
    start = next(i for i, w in enumerate(words) if any(e in w for e in ENTRY_POINTS))
    config_dir, name, overrides = None, "ppo_trainer", []
    notes: list[str] = []
    arguments = iter(words[start + 1 :])
    for word in arguments:
        if word in ("--config-path", "--config-name"):
            word = f"{word}={next(arguments, '')}"
        if word.startswith("--config-path="):
            # Hydra reads a relative path against verl/trainer/; a script beside its
            # configs is the usual case when verl is not installed: read it against the
            # script's folder (the report says so)
            given = Path(word.split("=", 1)[1])
            config_dir = given if given.is_absolute() else (path.parent / given).resolve()
            if not given.is_absolute():
                notes.append(f"--config-path={given} read against the script's folder")
        elif word.startswith("--config-name="):
            name = word.split("=", 1)[1]
        elif word in ("|", "&&", ";", ">", "2>&1") or word.startswith(">"):
            break
        elif "=" in word or word.startswith("~"):
            overrides.append(word)
    used = " ".join([*overrides, str(config_dir or ""), name])
    unresolved = sorted({next(n for n in found if n) for found in VARIABLE.findall(used)})
    return Launch(config_dir, name.removesuffix(".yaml"), overrides, unresolved, notes)
