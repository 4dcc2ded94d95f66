"""The embedded default and the built-in tasks: verifiable problems generated in code for
the tiny model (`data.train_files: [builtin:<name>]`)."""

from pathlib import Path
from typing import Any

DEMO_CONFIG = Path(__file__).with_name("grpo_demo.yaml")
# data files that are generated in code, each the only file of its list
BUILTIN_DATA = (
    "builtin:arithmetic",
    "builtin:calculator",
    "builtin:judge_grades",  # the judge demo's (rl.core.demo.judge)
    "builtin:arithmetic_judged",
)


def is_builtin(files: tuple[str, ...]) -> bool:
    """Whether a data-file list is one built-in data set (generated, not read)."""
    return len(files) == 1 and files[0] in BUILTIN_DATA


def builtin_rows(name: str, count: int, seed: int, max_operand: int) -> list[dict[str, Any]]:
    """The rows of the built-in data set `name` (one of BUILTIN_DATA)."""
    if name == "builtin:calculator":
        from rl.core.demo.calculator import calculator_rows

        return calculator_rows(count, seed, max_operand)
    if name in ("builtin:judge_grades", "builtin:arithmetic_judged"):
        from rl.core.demo.judge import judge_grade_rows, judged_rows

        make = judge_grade_rows if name == "builtin:judge_grades" else judged_rows
        return make(count, seed, max_operand)
    from rl.core.demo.arithmetic import arithmetic_rows

    return list(arithmetic_rows(count, seed, max_operand))


__all__ = ["BUILTIN_DATA", "DEMO_CONFIG", "builtin_rows", "is_builtin"]
