"""rl-core imports without Hydra: the config dialects that compose with it live in rl-cli.

OmegaConf stays a dependency of rl-core (its config loader reads YAML with `${...}`
interpolation through it), so only `hydra` is made unimportable here.
"""

import ast
import json
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

import rl.core

BLOCKED = ("hydra",)
CORE = Path(__file__).resolve().parents[1]

# Every module under rl.core is imported in a fresh interpreter whose first act is to put
# a finder at the head of sys.meta_path that refuses these top-level packages; the finder
# records which rl.core module asked for them (the innermost rl.core frame of the import).
SCRIPT = textwrap.dedent(
    """
    import importlib
    import importlib.abc
    import json
    import sys

    BLOCKED = set(sys.argv[1].split(","))
    already = sorted(name for name in sys.modules if name.split(".")[0] in BLOCKED)
    asked = {}


    def importer():
        frame = sys._getframe(2)
        while frame is not None:
            name = frame.f_globals.get("__name__", "")
            if name == "rl.core" or name.startswith("rl.core."):
                return name
            frame = frame.f_back
        return "?"


    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                asked.setdefault(importer(), name)
                raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
            return None


    sys.meta_path.insert(0, Refuse())

    import pkgutil

    import rl.core

    broken = {}


    def record(name):
        broken[name] = repr(sys.exc_info()[1])


    modules = [m.name for m in pkgutil.walk_packages(rl.core.__path__, "rl.core.", record)]
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as error:
            broken[name] = repr(error)
    print(json.dumps({"already": already, "asked": asked, "broken": broken, "count": len(modules)}))
    """
)


def imports_without(*blocked: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, ",".join(blocked)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


def test_every_rl_core_module_imports_without_hydra():
    found = imports_without(*BLOCKED)
    assert not found["already"], f"imported before the check could block it: {found['already']}"
    assert found["count"] > 50, found  # the walk saw the package, not an empty namespace
    needing = [f"{module} imports {name}" for module, name in sorted(found["asked"].items())]
    assert not needing, "rl.core must not need Hydra (the dialects live in rl.cli): " + "; ".join(
        needing
    )
    assert not found["broken"], found["broken"]


def test_no_rl_core_source_imports_hydra_even_lazily():
    """The import above runs module bodies only; an import inside a function shows here."""
    needing = []
    for root in rl.core.__path__:
        for path in sorted(Path(root).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    names = [node.module or ""]
                else:
                    continue
                needing += [
                    f"{path.relative_to(root)}:{node.lineno} imports {name}"
                    for name in names
                    if name.split(".")[0] in BLOCKED
                ]
    assert not needing, "rl.core must not need Hydra (the dialects live in rl.cli): " + "; ".join(
        needing
    )


def test_rl_core_does_not_declare_hydra():
    declared = tomllib.loads((CORE / "pyproject.toml").read_text())["project"]["dependencies"]
    assert not [line for line in declared if Requirement(line).name == "hydra-core"]
