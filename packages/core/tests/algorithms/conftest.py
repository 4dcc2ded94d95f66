import pytest
import torch


@pytest.fixture(autouse=True)
def float64_by_default():
    """The algorithm tests compare with float64 references; restore the default afterwards."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


@pytest.fixture
def isolated_registries(monkeypatch):
    """Let a test register names without leaking them into other tests."""
    from rl.core import algorithms as alg

    for registry in (
        alg.ADVANTAGE_ESTIMATORS,
        alg.POLICY_LOSSES,
        alg.LOSS_AGG_MODES,
        alg.KL_ESTIMATORS,
        alg.KL_CONTROLLERS,
    ):
        monkeypatch.setattr(registry, "_items", dict(registry._items))
