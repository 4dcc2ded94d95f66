"""Which scorer a row uses, from its `data_source`, and the custom reward function from a file."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rl.core.errors import ConfigError
from rl.core.imports import load_user_file
from rl.core.rewards import code, rule_based

ScoreFn = Callable[..., Any]

SCORERS: dict[str, Callable[[str, Any], float]] = {
    "openai/gsm8k": rule_based.gsm8k,
    "gsm8k": rule_based.gsm8k,
    "math": rule_based.math,
    "lighteval/MATH": rule_based.math,
    "DigitalLearningGmbH/MATH-lighteval": rule_based.math,
    "HuggingFaceH4/MATH-500": rule_based.math,
    "arithmetic": rule_based.arithmetic,
    "calculator": rule_based.calculator,
    **dict.fromkeys(code.DATA_SOURCES, code.code),
}


def default_compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None
) -> float:
    """The rule-based score of one response, chosen by `data_source`."""
    try:
        scorer = SCORERS[data_source]
    except KeyError:
        raise ConfigError(
            f"no rule-based reward for data_source {data_source!r} (known: "
            f"{', '.join(sorted(SCORERS))}); set reward.custom_reward_function.path"
        ) from None
    return scorer(solution_str, ground_truth)


def load_custom_reward(path: str, name: str = "compute_score") -> ScoreFn:
    """`name` from the Python file `path`: compute_score(data_source, solution_str,
    ground_truth, extra_info=None) -> float | {"score": float, ...}.

    Everything the user can get wrong here (no file, not Python, an import that fails, no such
    function, a signature that cannot take the four arguments) is a `ConfigError` at start-up,
    not a failure on every response mid-run.
    """
    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(
            f"reward.custom_reward_function.path = {path!r} does not exist; point it at a .py file"
        )
    module = load_user_file(
        file, f"rl_custom_reward_{file.stem}", "reward.custom_reward_function.path"
    )
    fn = getattr(module, name, None)
    if not callable(fn):
        found = sorted(
            n
            for n, v in vars(module).items()
            if callable(v) and not n.startswith("_") and not inspect.isclass(v)
        )
        raise ConfigError(
            f"{file} has no function {name!r} (reward.custom_reward_function.name); "
            f"functions found: {', '.join(found) or 'none'}"
        )
    _check_signature(file, name, fn)
    return fn


def _check_signature(file: Path, name: str, fn: ScoreFn) -> None:
    """Fail now if `fn` cannot take the four positional arguments every call passes."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or C callable: its call will tell
        return
    try:
        signature.bind("data_source", "solution_str", "ground_truth", None)
    except TypeError as error:
        raise ConfigError(
            f"{file}: {name}{signature} cannot be called as "
            f"{name}(data_source, solution_str, ground_truth, extra_info) ({error}); "
            "give it that signature (extra_info may default to None)"
        ) from None
