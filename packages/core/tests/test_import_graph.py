"""The direction of every import between our packages and between rl-core's rooms, read
from the source of all six packages (functions' lazy imports included): a layer imports
only itself and the layers below it, and nothing in a layer imports in a circle.

The layers, bottom up, are written in docs/architecture.md ("Which room may import
which"); a new room of rl-core must be placed here before it can land.
"""

from __future__ import annotations

import ast
import itertools
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

# our distributions, as the first two parts of a module name; what each may import
PACKAGE_DEPENDS = {
    "rl.kernels": set(),
    "rl.core": {"rl.kernels"},
    "rl.fsdp": {"rl.core", "rl.kernels"},
    "rl.megatron": {"rl.core", "rl.kernels"},
    "rl.rollout": {"rl.core", "rl.kernels"},
    "rl.cli": {"rl.core", "rl.kernels", "rl.fsdp", "rl.megatron", "rl.rollout", "rl.bench"},
    "rl.bench": {"rl.core", "rl.kernels", "rl.fsdp", "rl.megatron", "rl.rollout", "rl.cli"},
}

# rl-core's rooms (its top-level modules and subpackages), bottom up
CORE_LAYERS = [
    # plain building blocks: errors, the contracts, files, the registry
    {
        "errors",
        "imports",
        "machine",
        "distributed",
        "batch",
        "vision",
        "engines",
        "role_spec",
        "micro_batches",
        "engine_contract",
        "checkpoint_io",
        "sharded_io",
        "placement",
        "registry",
        "rng",
        "atomic_files",
        "file_modes",
        "norms",
        "parent_death",
    },
    # the RL domain: config, data, algorithms, rewards, models, weight-sync planning
    {
        "config",
        "data",
        "agent",
        "demo",
        "algorithms",
        "models",
        "optim",
        "logging",
        "rewards",
        "weight_sync",
        "updates",
        "evaluation",
        "doctor",
        "bench",
    },
    # the roles on their workers (local or Ray), driven through the contracts; the plan
    # of a run (placement, batches per rank, memory per device) read from them
    {"workers", "plan"},
    # the controller
    {"trainer"},
    # the contract tests engines are held to (they build batches as the controller does)
    {"conformance"},
]


def _module_name(path: Path) -> str:
    source = next(parent for parent in path.parents if parent.name == "src")
    parts = path.relative_to(source).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every rl.* module `path` imports, at any depth of its code."""
    found = set()
    package = _module_name(path).rsplit(".", 0 if path.name == "__init__.py" else 1)[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                found.add(".".join(base + ([node.module] if node.module else [])))
            elif node.module:
                found.add(node.module)
    return {name for name in found if name.startswith("rl.")}


def _sources() -> dict[str, set[str]]:
    return {
        _module_name(path): _imports(path)
        for path in sorted(ROOT.glob("packages/*/src/rl/**/*.py"))
    }


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if parts[:2] == ["rl", "core"] and len(parts) > 2 else None


SOURCES = _sources()


def test_the_scan_sees_every_package():
    assert {_package(m) for m in SOURCES} == set(PACKAGE_DEPENDS)


@pytest.mark.parametrize("package", sorted(PACKAGE_DEPENDS))
def test_a_package_imports_only_what_it_depends_on(package):
    allowed = PACKAGE_DEPENDS[package] | {package}
    wrong = sorted(
        f"{module} imports {name}"
        for module, names in SOURCES.items()
        if _package(module) == package
        for name in names
        if _package(name) not in allowed
    )
    assert not wrong, f"{package} may import only {sorted(allowed)}:\n" + "\n".join(wrong)


def _layer_of() -> dict[str, int]:
    return {room: level for level, rooms in enumerate(CORE_LAYERS) for room in rooms}


def test_every_room_of_core_has_a_layer():
    rooms = {_room(m) for m in SOURCES if _room(m)}
    unplaced = sorted(rooms - set(_layer_of()))
    assert not unplaced, f"place these rooms of rl.core in CORE_LAYERS: {unplaced}"


def _room_edges() -> dict[str, dict[str, list[str]]]:
    edges: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for module, names in SOURCES.items():
        room = _room(module)
        for name in names:
            target = _room(name)
            if room and target and target != room:
                edges[room][target].append(f"{module} imports {name}")
    return edges


def test_core_rooms_import_only_their_layer_and_below():
    layer = _layer_of()
    upward = sorted(
        line
        for room, targets in _room_edges().items()
        for target, lines in targets.items()
        if room in layer and target in layer and layer[target] > layer[room]
        for line in lines
    )
    assert not upward, "imports that point up the layers of rl.core:\n" + "\n".join(upward)


def test_core_rooms_import_in_no_circle():
    edges = _room_edges()
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(room: str, path: list[str]) -> list[str] | None:
        state[room] = 1
        for target in edges.get(room, {}):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target] if target in path else [room, target]
            if target not in state and (cycle := visit(target, [*path, target])):
                return cycle
        state[room] = 2
        return None

    for room in sorted(edges):
        if room not in state and (cycle := visit(room, [room])):
            detail = "\n".join(edges[a][b][0] for a, b in itertools.pairwise(cycle))
            pytest.fail(f"rl.core's rooms import in a circle: {' -> '.join(cycle)}\n{detail}")


def test_shipped_code_reads_backend_sections_typed_never_as_attributes():
    """`config.actor.fsdp_config` (the config sections' `__getattr__`) is a convenience for
    users and tests; shipped code reads a backend's section typed, through
    `RoleSpec.backend(key, cls)` (an isinstance-checked lookup), or by key."""
    from rl.core.config.sections import section_classes

    keys = set(section_classes()) | {"fsdp_config", "megatron"}
    found = []
    for path in sorted(Path(__file__).resolve().parents[3].glob("packages/*/src/**/*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            attribute = isinstance(node, ast.Attribute) and node.attr in keys
            if attribute and ast.unparse(node.value) != "rl":  # not the rl.megatron package
                found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "\n".join(found)
