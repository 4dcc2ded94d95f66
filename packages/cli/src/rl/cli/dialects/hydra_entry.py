"""Which config a verl entry module runs, found as Hydra finds it: `@hydra.main(config_path=,
config_name=)` of the module's file (read with `ast`; nothing of verl is imported), a
relative `--config-path` read against that file's folder, `pkg://` against a package's.

The module's file is looked for where `python -m` would find it, then beside the script:
the current directory, `PYTHONPATH`, the installed package (`importlib.util.find_spec` of
the top-level name, which imports nothing), and last the checkout that holds the script
(its folders walked up: verl's scripts are run from the checkout's root).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rl.core.config.errors import ConfigError

ENTRY_MODULE = re.compile(
    r"^(?:verl\.trainer\.main_ppo|verl\.trainer\.(?:fsdp_)?sft_trainer"
    r"|verl\.experimental(?:\.\w+)*\.\w*main\w*|recipe(?:\.\w+)*\.main_\w+)$"
)
ENTRY_FILE = re.compile(
    r"(?:^|/)((?:verl/trainer/main_ppo|verl/trainer/(?:fsdp_)?sft_trainer"
    r"|verl/experimental(?:/\w+)*/\w*main\w*|recipe(?:/\w+)*/main_\w+)\.py)$"
)
LAUNCHER = re.compile(r"^(?:python[\d.]*|pypy3?|torchrun)$")
MENTION = re.compile(
    r"verl[./]trainer[./](?:main_ppo|(?:fsdp_)?sft_trainer)\b|verl[./]experimental[./][\w./]*main"
    r"|recipe[./]\w+[./]main_\w+"
)
KNOWN_NAMES = {"verl.trainer.main_ppo": "ppo_trainer"}  # stable in every verl release


@dataclass(frozen=True)
class Entry:
    """The module a launch command runs, and its file where one was found."""

    module: str  # dotted name (verl.trainer.main_ppo)
    file: Path | None
    where: str  # how the file was found, for the report


@dataclass(frozen=True)
class Search:
    """Where `python -m` looks, as the launch command runs."""

    cwd: Path | None
    pythonpath: Sequence[str]
    script: Path


def mentions_entry(text: str) -> bool:
    """Whether the text of a script names a verl entry module (detection)."""
    return MENTION.search(text) is not None


def entry_in(words: Sequence[str]) -> tuple[int, str] | None:
    """(index of the word that names it, dotted module) of the entry a command runs:
    `python3 [-u] -m MODULE` or `python3 path/to/MODULE.py` (also after torchrun, `env`,
    `ray job submit --`), else None."""
    launcher = False
    for index, word in enumerate(words):
        if LAUNCHER.match(os.path.basename(word)):
            launcher = True
        elif launcher and word in ("-m", "--module") and index + 1 < len(words):
            if ENTRY_MODULE.match(words[index + 1]):
                return index + 1, words[index + 1]
        elif launcher and "=" not in word and (found := ENTRY_FILE.search(word)):
            return index, found.group(1).removesuffix(".py").replace("/", ".")
    return None


def find(module: str, file_word: str | None, search: Search) -> Entry:
    """The entry `module` (run as the file `file_word` if given) with its file if found."""
    if file_word is not None:
        given = Path(file_word)
        path = given if given.is_absolute() or search.cwd is None else search.cwd / given
        if path.is_file():
            return Entry(module, path.resolve(), f"{file_word} as the command names it")
    relative = Path(*module.split(".")).with_suffix(".py")
    roots = [search.cwd] if search.cwd is not None else []
    roots += [
        Path(p) if os.path.isabs(p) or search.cwd is None else search.cwd / p
        for p in search.pythonpath
        if p
    ]
    for root in roots:
        if (root / relative).is_file():
            where = "the current directory" if root == search.cwd else f"PYTHONPATH ({root})"
            return Entry(module, (root / relative).resolve(), where)
    installed = _installed(module)
    if installed is not None:
        return Entry(module, installed, f"the installed {module.split('.')[0]}")
    for folder in search.script.resolve().parents:
        if (folder / relative).is_file():
            return Entry(
                module, folder / relative, f"the checkout that holds the script ({folder})"
            )
    return Entry(module, None, "")


def _installed(module: str) -> Path | None:
    """The file of `module` in the installed package of its top-level name (nothing is
    imported: find_spec of a top-level name only searches sys.path)."""
    top, *rest = module.split(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    for location in spec.submodule_search_locations or []:
        path = Path(location, *rest).with_suffix(".py") if rest else None
        if path is not None and path.is_file():
            return path
    return None


def package_folder(name: str, search: Search) -> Path | None:
    """The folder of the package `name` (a `pkg://` config path)."""
    relative = Path(*name.split("."))
    roots = [search.cwd] if search.cwd is not None else []
    for root in roots:
        if (root / relative).is_dir():
            return root / relative
    top, *rest = name.split(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    for location in (spec.submodule_search_locations or []) if spec else []:
        if Path(location, *rest).is_dir():
            return Path(location, *rest)
    for folder in search.script.resolve().parents:
        if (folder / relative).is_dir():
            return folder / relative
    return None


def hydra_main(file: Path) -> tuple[str | None, str | None] | None:
    """(config_path, config_name) of the `@hydra.main(...)` in `file`, None without one.
    ConfigError when they are not plain strings."""
    try:
        tree = ast.parse(file.read_text(encoding="utf-8"), str(file))
    except (OSError, SyntaxError, ValueError) as error:
        raise ConfigError(f"{file} could not be read: {error}") from None
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for decorator in node.decorator_list:
            if isinstance(decorator, ast.Call) and _is_hydra_main(decorator.func):
                named = dict(zip(("config_path", "config_name"), decorator.args, strict=False))
                named |= {k.arg: k.value for k in decorator.keywords if k.arg}
                return _string(named.get("config_path"), file), _string(
                    named.get("config_name"), file
                )
    return None


def _is_hydra_main(function: ast.expr) -> bool:
    return (
        isinstance(function, ast.Attribute)
        and function.attr == "main"
        and isinstance(function.value, ast.Name)
        and function.value.id == "hydra"
    )


def _string(node: ast.expr | None, file: Path) -> str | None:
    if node is None:
        return None
    if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, str)):
        return node.value
    raise ConfigError(f"{file}: @hydra.main's arguments are not plain strings; rl cannot read them")


def config_file(
    entry: Entry, config_path: str | None, config_name: str | None, search: Search
) -> tuple[Path, str]:
    """The config file the entry runs with the command's `--config-path`/`--config-name`
    (None when not given), and a note on how it was found; ConfigError (one line) when it
    cannot be known."""
    declared: tuple[str | None, str | None] = (None, None)
    if entry.file is not None:
        found = hydra_main(entry.file)
        if found is None:
            raise ConfigError(
                f"{entry.file} declares no @hydra.main, so the config {entry.module} runs is "
                "unknown: pass --config-path (absolute) and --config-name in the script"
            )
        declared = found
    path = config_path if config_path is not None else declared[0]
    name = (
        config_name
        or declared[1]
        or (KNOWN_NAMES.get(entry.module) if entry.file is None else None)
    )
    if entry.file is None and (
        path is None or not (os.path.isabs(path) or path.startswith("pkg://"))
    ):
        what = (
            f"--config-path={path} (read against that module's folder)"
            if path
            else "its built-in config"
        )
        raise ConfigError(
            f"{entry.module} is neither installed nor in a checkout that holds the script, so "
            f"{what} cannot be found: install verl (`pip install --no-deps verl`; rl only reads "
            "its config files), run rl from the checkout's root, or give the script an "
            "absolute --config-path"
        )
    if path is None or not name:
        missing = "--config-path" if path is None else "--config-name"
        raise ConfigError(
            f"{entry.module} names no config of its own: pass {missing} in the script"
        )
    folder = _folder(entry, path, search)
    file = folder / (name if name.endswith(".yaml") else f"{name}.yaml")
    if entry.file is None:
        return file, f"the config {file} (--config-path={path}; {entry.module} not found)"
    return file, f"the config {file}, as {entry.module} from {entry.where} reads it"


def _folder(entry: Entry, path: str, search: Search) -> Path:
    if os.path.isabs(path):
        return Path(path)
    if path.startswith("pkg://"):
        package = path.removeprefix("pkg://").strip("/").replace("/", ".")
        folder = package_folder(package, search)
        if folder is None:
            raise ConfigError(f"--config-path={path}: the package {package} was not found")
        return folder.resolve()
    assert entry.file is not None
    return Path(os.path.normpath(os.path.join(os.path.realpath(entry.file.parent), path)))
