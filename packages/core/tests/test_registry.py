"""The `rl.engines` entry-point registry, with the real installed packages and a real
distribution written to disk."""

import importlib.metadata
import sys
import textwrap

import pytest

from rl.core.engine_contract import EngineContractError
from rl.core.imports import MissingDependencyError
from rl.core.registry import (
    EngineSpec,
    find_engine,
    installed_engines,
    load_engine_class,
)


def test_every_backend_of_the_monorepo_is_registered():
    ours = {"rl-fsdp", "rl-megatron", "rl-rollout"}
    found = {
        (e.spec.role, e.spec.name): e.distribution
        for e in installed_engines()
        if e.distribution in ours
    }
    assert found == {
        ("train", "fsdp"): "rl-fsdp",
        ("train", "megatron"): "rl-megatron",
        ("rollout", "hf"): "rl-rollout",
        ("rollout", "vllm"): "rl-rollout",
        ("rollout", "sglang"): "rl-rollout",
    }
    assert [e.spec.name for e in installed_engines("train")][:2] == ["fsdp", "megatron"]


def test_unknown_engine_lists_installed_ones_and_how_to_install():
    with pytest.raises(
        LookupError,
        match=r"no train engine named 'deepspeed' is installed \(installed: fsdp, megatron",
    ):
        find_engine("deepspeed", "train")
    with pytest.raises(
        LookupError, match=r"installed: .*Install it with: pip install 'rl-megatron'"
    ):
        find_engine("megatron", "rollout")


@pytest.fixture
def toy_distribution(tmp_path, monkeypatch):
    """A real installed distribution on sys.path registering two engines."""
    (tmp_path / "toy_engine.py").write_text(
        textwrap.dedent(
            """
            from rl.core.engines import Closable, RolloutEngine
            from rl.core.registry import EngineSpec

            class ToyEngine(RolloutEngine):
                @classmethod
                def from_config(cls, config, tokenizer):
                    return cls()

                def generate(self, prompt_ids, sampling): ...
                async def generate_one(self, prompt_ids, sampling): ...
                def update_weights(self, named_tensors): ...
                def weight_group(self, name): return name
                def sleep(self): ...
                def wake(self): ...

            class Undeclared:
                pass

            class HalfDone(ToyEngine, Closable):
                pass

            GOOD = EngineSpec("toy", "rollout", "toy_engine:ToyEngine")
            NEEDS = EngineSpec("needy", "rollout", "toy_engine:ToyEngine",
                               requires=("no_such_module_xyz",), install="toy[extra]")
            NOT_A_SPEC = 42
            UNDECLARED = EngineSpec("undeclared", "rollout", "toy_engine:Undeclared")
            HALF = EngineSpec("half", "rollout", "toy_engine:HalfDone")
            AS_TRAINER = EngineSpec("as-trainer", "train", "toy_engine:ToyEngine")
            """
        )
    )
    info = tmp_path / "toy_engine-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-engine\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text(
        "[rl.engines]\ntoy = toy_engine:GOOD\nneedy = toy_engine:NEEDS\n"
        "undeclared = toy_engine:UNDECLARED\nhalf = toy_engine:HALF\n"
        "as-trainer = toy_engine:AS_TRAINER\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("toy_engine", None)


def test_a_third_party_distribution_registers_through_entry_points(toy_distribution):
    engine = find_engine("toy", "rollout")
    assert (engine.distribution, engine.version) == ("toy-engine", "1.2.3")
    assert engine.usable and engine.implemented
    assert load_engine_class("toy", "rollout").__name__ == "ToyEngine"


def test_an_engine_is_held_to_the_contract_it_declares_when_it_loads(toy_distribution):
    with pytest.raises(
        EngineContractError,
        match=r"the undeclared rollout engine \(toy-engine 1.2.3\): Undeclared does not "
        r"declare rl.core.engines.RolloutEngine among its bases",
    ):
        load_engine_class("undeclared", "rollout")
    with pytest.raises(
        EngineContractError, match="HalfDone declares Closable but does not define close"
    ):
        load_engine_class("half", "rollout")
    with pytest.raises(
        EngineContractError, match="ToyEngine does not declare rl.core.engines.TrainEngine"
    ):
        load_engine_class("as-trainer", "train")


def test_missing_dependency_names_what_to_install(toy_distribution):
    engine = find_engine("needy", "rollout")
    assert engine.missing == ("no_such_module_xyz",) and not engine.usable
    with pytest.raises(
        MissingDependencyError, match=r"needs no_such_module_xyz: pip install 'toy\[extra\]'"
    ):
        load_engine_class("needy", "rollout")


def test_entry_point_that_is_not_a_spec_is_rejected(toy_distribution):
    info = toy_distribution / "toy_engine-1.2.3.dist-info" / "entry_points.txt"
    info.write_text("[rl.engines]\nbroken = toy_engine:NOT_A_SPEC\n")
    with pytest.raises(
        TypeError,
        match="'broken' = 'toy_engine:NOT_A_SPEC'.*must point at an rl.core.registry.EngineSpec",
    ):
        installed_engines()


def test_registered_but_unimplemented_factory_says_so():
    engine = find_engine("sglang", "rollout")
    spec = EngineSpec("x", "train", "rl.core.no_such_module:Engine")
    assert engine.spec.factory == "rl.rollout.sglang:SGLangRolloutEngine"
    assert not type(engine)(spec, "rl-x", "0").implemented


def test_entry_points_are_in_the_installed_metadata():
    names = {ep.name for ep in importlib.metadata.entry_points(group="rl.engines")}
    assert {"fsdp", "megatron", "hf", "vllm", "sglang"} <= names


def test_every_registered_engine_is_held_to_the_conformance_suite():
    """Each distribution of this repository that registers engines runs
    `rl.core.conformance` over all of them (its tests/test_conformance.py parametrises
    over its own entries in the registry, so a new engine is covered the day it lands)."""
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    folders = {
        tomllib.loads(path.read_text())["project"]["name"]: path.parent
        for path in root.glob("packages/*/pyproject.toml")
    }
    for engine in installed_engines():
        suite = folders[engine.distribution] / "tests" / "test_conformance.py"
        assert suite.is_file(), f"{engine.spec.name}: {suite} is missing"
        text = suite.read_text()
        assert "rl.core.conformance" in text and "installed_engines(" in text, suite
