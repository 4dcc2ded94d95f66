"""rl-megatron's engines pass the contract tests every registered engine passes
(`rl.core.conformance`): each train engine this distribution registers, in a rank
process, in rl-megatron's CPU debug mode (see conftest.py)."""

import pytest

from rl.core.registry import installed_engines

# rl.core.conformance runs inside the rank process (_ranks.scenario_conformance)
ENGINES = [e.spec.name for e in installed_engines("train") if e.distribution == "rl-megatron"]

pytestmark = pytest.mark.megatron


@pytest.mark.parametrize("name", ENGINES)
def test_the_engine_meets_the_train_engine_contract(name, run_ranks):
    (result,) = run_ranks("conformance", 1, engine=name)
    assert result == {"engine": name}
