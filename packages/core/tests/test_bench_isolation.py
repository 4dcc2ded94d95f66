"""Monorepo rule: benchmarks live in one `bench` subpackage per package (rl-cli's is
`rl.bench`), and no shipped (non-bench) module imports one, at module level or inside a
function. An AST scan of every package's sources: fast, and it imports nothing."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = sorted(p.parent for p in (ROOT / "packages").glob("*/pyproject.toml"))


def module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_bench(module: str) -> bool:
    """In a package's bench subpackage: rl.<package>.bench[.*], or rl-cli's rl.bench[.*]."""
    parts = module.split(".")
    return parts[:2] == ["rl", "bench"] or (len(parts) > 2 and parts[2] == "bench")


def imported_modules(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Every module an import statement of `tree` names (relative imports resolved;
    `from a import b` counts as a and as a.b, since b may be a submodule)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def shipped_modules(package: Path):
    src = package / "src"
    for path in sorted(src.rglob("*.py")):
        module = module_name(path, src)
        if not is_bench(module):
            yield path, module


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_no_shipped_module_imports_a_benchmark(package):
    offenders = {}
    for path, module in shipped_modules(package):
        tree = ast.parse(path.read_text(), filename=str(path))
        found = sorted(
            name
            for name in imported_modules(tree, module, path.name == "__init__.py")
            if name.startswith("rl.") and is_bench(name)
        )
        if found:
            offenders[module] = found
    assert not offenders, f"shipped modules importing benchmarks: {offenders}"


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_benchmark_code_lives_in_the_bench_subpackage(package):
    stray = [
        module
        for path, module in shipped_modules(package)
        if any("bench" in part for part in module.split("."))
    ]
    assert not stray, f"benchmark modules outside a bench subpackage: {stray}"


def test_the_scan_sees_relative_and_lazy_imports():
    source = "def f():\n    from ..bench import harness\n    import rl.core.bench.scaling\n"
    names = imported_modules(ast.parse(source), "rl.kernels.ops.logprob", False)
    assert {"rl.kernels.bench", "rl.kernels.bench.harness", "rl.core.bench.scaling"} <= names
