"""verl's rule-based scorers, loaded from each fetched release's files, as the oracle of rl's.

Only the scorer files are loaded (by path, under private module names): `import verl` would
pull in verl's heavy dependencies, and rl never imports verl.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

HERE = Path(__file__).parent
SCORER_FILES = ("gsm8k", "math_reward", "math_dapo", "geo3k")


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def verl_scorers(verl_release):
    """`verl_scorers(version)` -> a namespace with verl's `gsm8k`, `math_reward`,
    `math_dapo` and `geo3k` modules of that release (geo3k imports mathruler)."""
    loaded: dict[str, SimpleNamespace] = {}

    def get(version: str) -> SimpleNamespace:
        if version not in loaded:
            folder = verl_release(version) / "verl" / "utils" / "reward_score"
            tag = version.replace(".", "_")
            loaded[version] = SimpleNamespace(
                **{
                    name: _load(folder / f"{name}.py", f"verl_{tag}_reward_score_{name}")
                    for name in SCORER_FILES
                }
            )
        return loaded[version]

    return get


def _strings(node: ast.AST) -> list[str]:
    return [
        n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]


def _routes(source: str) -> list[dict[str, Any]]:
    """The branches of verl's `default_compute_score`: for each, the data sources it compares
    equal to (`names`), the prefixes it tests with startswith (`prefixes`), and the scorer
    modules its body imports."""
    tree = ast.parse(source)
    function = next(
        n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "default_compute_score"
    )
    branch = next(n for n in function.body if isinstance(n, ast.If))
    routes = []
    while isinstance(branch, ast.If):
        prefixes = [
            arg.value
            for call in ast.walk(branch.test)
            if isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "startswith"
            for arg in call.args
            if isinstance(arg, ast.Constant)
        ]
        modules = [
            alias.name
            for n in branch.body
            for inner in ast.walk(n)
            if isinstance(inner, ast.ImportFrom)
            for alias in inner.names
        ]
        names = [s for s in _strings(branch.test) if s not in prefixes]
        routes.append({"names": names, "prefixes": prefixes, "modules": modules})
        branch = branch.orelse[0] if len(branch.orelse) == 1 else None
    return routes


@pytest.fixture(scope="session")
def verl_routes(verl_release):
    """`verl_routes(version)` -> the branches of that release's `default_compute_score`."""

    def get(version: str) -> list[dict[str, Any]]:
        init = verl_release(version) / "verl" / "utils" / "reward_score" / "__init__.py"
        return _routes(init.read_text())

    return get


@pytest.fixture(scope="session")
def answer_cases():
    """The generated responses and ground truths of `_verl_cases.py`."""
    return _load(HERE / "_verl_cases.py", "rewards_tests_verl_cases")
