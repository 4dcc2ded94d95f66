"""Monorepo rules: the `rl` namespace, per-package versions, sibling ranges that admit siblings."""

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = sorted(p.parent for p in (ROOT / "packages").glob("*/pyproject.toml"))


def project(path: Path) -> dict:
    return tomllib.loads((path / "pyproject.toml").read_text())["project"]


def test_six_packages():
    assert {project(p)["name"] for p in PACKAGES} == {
        "rl-core",
        "rl-kernels",
        "rl-fsdp",
        "rl-megatron",
        "rl-rollout",
        "rl-cli",
    }


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_namespace_package_has_no_init(package):
    assert (package / "src" / "rl").is_dir()
    assert not (package / "src" / "rl" / "__init__.py").exists(), "rl is a PEP 420 namespace"


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_package_has_readme_changelog_and_matching_version(package):
    assert (package / "README.md").stat().st_size > 200
    meta = project(package)
    assert f"## {meta['version']}" in (package / "CHANGELOG.md").read_text()
    # the module named after the distribution carries its version (rl-cli also ships
    # rl.bench, the whole-step benchmarks)
    module_dir = package / "src" / "rl" / meta["name"].removeprefix("rl-")
    init = (module_dir / "__init__.py").read_text()
    assert f'__version__ = "{meta["version"]}"' in init


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_sibling_dependencies_are_ranges_that_admit_the_sibling(package):
    versions = {project(p)["name"]: Version(project(p)["version"]) for p in PACKAGES}
    for line in project(package).get("dependencies", []):
        requirement = Requirement(line)
        if requirement.name in versions:
            assert len(requirement.specifier) == 2, f"{line}: use a range like >=0.1,<0.2"
            assert versions[requirement.name] in requirement.specifier, line


def test_kernels_depend_on_nothing_of_ours():
    deps = [Requirement(d).name for d in project(ROOT / "packages" / "kernels")["dependencies"]]
    assert not [d for d in deps if d.startswith("rl-")]
