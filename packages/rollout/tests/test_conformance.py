"""rl-rollout's engines pass the contract tests every registered engine passes
(`rl.core.conformance`): each rollout engine this distribution registers, where its
backend is installed (vLLM's CPU build is, in CI; SGLang needs a GPU)."""

import pytest

from rl.core.conformance import check_rollout_engine
from rl.core.registry import installed_engines

ENGINES = [e for e in installed_engines("rollout") if e.distribution == "rl-rollout"]


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.spec.name)
def test_the_engine_meets_the_rollout_engine_contract(engine):
    if not engine.usable:
        pytest.skip(f"{engine.spec.name} needs {', '.join(engine.missing)}")
    check_rollout_engine(engine.spec.name)
