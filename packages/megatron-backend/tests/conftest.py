"""Engine scenarios on 1, 2 or 4 CPU processes (gloo), each rank in its own process
(forked from a server that imported torch, transformers and megatron-core once: the root
conftest's `warm_ranks`).

megatron-core runs there in rl-megatron's CPU debug mode (`rl.megatron.cpu_mode`), which
each engine built on the CPU installs in its own process, as in a run; the pytest
process never installs it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from warm_ranks import on_a_free_port

RANKS = Path(__file__).parent / "_ranks.py"


# what a rank imports, loaded once in the warm-ranks server (beside _ranks.py's own imports)
PRELOAD = (
    "megatron.core",
    "transformers.models.auto.modeling_auto",
    "transformers.models.qwen2.modeling_qwen2",
    "transformers.models.qwen3.modeling_qwen3",
    "transformers.models.qwen3_moe.modeling_qwen3_moe",
    "transformers.models.llama.modeling_llama",
    "rl.megatron.engine",
)


def _run(
    warm_ranks: Callable[..., list[str]],
    tmp_path: Path,
    scenario: str,
    world: int,
    layout: dict[str, Any],
) -> list[Any]:
    out = tmp_path / f"{scenario}-{world}-{abs(hash(json.dumps(layout, sort_keys=True)))}"
    out.mkdir()
    on_a_free_port(
        lambda port: warm_ranks(
            RANKS,
            [[scenario, rank, world, port, out, json.dumps(layout)] for rank in range(world)],
            preload=PRELOAD,
        )
    )
    return [torch.load(out / f"{rank}.pt", weights_only=False) for rank in range(world)]


@pytest.fixture(scope="module")
def resume_runs(
    tmp_path_factory: pytest.TempPathFactory, warm_ranks: Callable[..., list[str]]
) -> Callable[..., list[Any]]:
    """`resume_runs(**layout)`: the 2-rank `resume` scenario at `layout`, run once per
    layout per test module (its checkpoint stays for the module's other tests to read)."""
    pytest.importorskip("megatron.core", reason="megatron-core is not installed")
    done: dict[str, list[Any]] = {}

    def run(**layout: Any) -> list[Any]:
        key = json.dumps(layout, sort_keys=True)
        if key not in done:
            done[key] = _run(warm_ranks, tmp_path_factory.mktemp("resume"), "resume", 2, layout)
        return done[key]

    return run


@pytest.fixture(scope="session")
def rl_executable() -> str:
    """The `rl` script of the interpreter running the tests, else the one on PATH."""
    import shutil

    beside = Path(sys.executable).with_name("rl")
    found = str(beside) if beside.exists() else shutil.which("rl")
    if found is None:
        pytest.fail("the `rl` console script is not installed: pip install -e packages/cli")
    return found


@pytest.fixture
def run_ranks(tmp_path: Path, warm_ranks: Callable[..., list[str]]) -> Callable[..., list[Any]]:
    """`run_ranks(scenario, world, **layout)`: each rank's result of `_ranks.scenario_<name>`."""
    pytest.importorskip("megatron.core", reason="megatron-core is not installed")

    def run(scenario: str, world: int = 1, **layout: Any) -> list[Any]:
        return _run(warm_ranks, tmp_path, scenario, world, layout)

    return run
