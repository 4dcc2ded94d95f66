"""rl-fsdp's engines pass the contract tests every registered engine passes
(`rl.core.conformance`): each train engine this distribution registers."""

import pytest

from rl.core.conformance import check_train_engine
from rl.core.registry import installed_engines

ENGINES = [e.spec.name for e in installed_engines("train") if e.distribution == "rl-fsdp"]


@pytest.mark.parametrize("name", ENGINES)
def test_the_engine_meets_the_train_engine_contract(name, tmp_path):
    check_train_engine(name, tmp_path)
