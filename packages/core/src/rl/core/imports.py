"""Lazy imports of heavy third-party packages with a one-line, actionable error."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from types import ModuleType

from rl.core.errors import ConfigError, UserError


class MissingDependencyError(UserError, ImportError):
    """A heavy optional dependency is not installed; the message names the extra."""


def is_installed(module: str) -> bool:
    """True when `module` can be imported, without importing it (cheap for vllm, ray, ...)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def require(module: str, install: str, feature: str | None = None) -> ModuleType:
    """Import `module` or raise `MissingDependencyError` saying `pip install <install>`.

    Example: `vllm = require("vllm", "rl-rollout[vllm]", "the vLLM rollout engine")`.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name is None or module.split(".")[0] != error.name.split(".")[0]:
            raise  # the package is there but one of *its* imports failed: show that
        needed_by = f" for {feature}" if feature else ""
        raise MissingDependencyError(
            f"{module} is not installed{needed_by}: pip install '{install}'"
        ) from None


def load_user_file(file: Path, module_name: str, key: str) -> ModuleType:
    """Run the user's Python file `file` (named by config key `key`) as module
    `module_name`: a `ConfigError` naming file and key when it is not Python or its import
    fails (raises, exits), rather than a traceback."""
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{file} is not a Python (.py) file ({key})")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as error:
        raise ConfigError(
            f"{file} could not be imported ({key}): {type(error).__name__}: {error}"
        ) from error
    return module
