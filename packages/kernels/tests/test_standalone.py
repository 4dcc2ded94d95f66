"""rl-kernels depends on nothing of ours: every rl.kernels module, benchmarks included,
imports in a process where rl.core and every other rl.* sibling is unimportable."""

import json
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(
    """
    import importlib, importlib.abc, json, pkgutil, sys

    class NoSiblings(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path=None, target=None):
            top = fullname.split(".")[:2]
            if top[0] == "rl" and len(top) == 2 and top[1] != "kernels":
                raise ModuleNotFoundError(f"blocked sibling {fullname}", name=fullname)
            return None

    sys.meta_path.insert(0, NoSiblings())
    import rl.kernels

    imported, missing, failed = [], {}, {}

    def import_one(name):
        try:
            importlib.import_module(name)
            imported.append(name)
        except ModuleNotFoundError as error:
            missing[name] = error.name or str(error)
        except Exception as error:  # noqa: BLE001 (reported, not hidden)
            failed[name] = repr(error)

    for info in pkgutil.walk_packages(rl.kernels.__path__, "rl.kernels.", onerror=import_one):
        if info.name not in imported and info.name not in missing and info.name not in failed:
            import_one(info.name)
    print(json.dumps({"imported": imported, "missing": missing, "failed": failed}))
    """
)


def test_every_rl_kernels_module_imports_without_our_other_packages():
    done = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.splitlines()[-1])
    siblings = {m: n for m, n in result["missing"].items() if n.startswith("rl.")}
    assert not siblings, f"rl.kernels modules that import our other packages: {siblings}"
    assert not result["failed"], result["failed"]
    # the walk really covered the package: ops, benchmarks and the harness
    names = set(result["imported"])
    assert {
        "rl.kernels.ops.logprob",
        "rl.kernels.bench.harness",
        "rl.kernels.bench.reshard",
    } <= names


def test_no_rl_kernels_source_names_a_sibling_even_lazily():
    """Imports inside functions (an optional `try: import rl.core...`) do not run above;
    every import statement of the package's sources is checked here."""
    import ast
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "src" / "rl" / "kernels"
    offenders = {}
    for path in sorted(src.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            for name in names:
                parts = name.split(".")
                if parts[0] == "rl" and len(parts) > 1 and parts[1] != "kernels":
                    offenders.setdefault(str(path.relative_to(src)), []).append(name)
    assert not offenders, f"rl.kernels sources importing our other packages: {offenders}"
