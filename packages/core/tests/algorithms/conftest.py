import pytest
import torch


@pytest.fixture(autouse=True)
def float64_by_default():
    """The algorithm tests compare with float64 references; restore the default afterwards."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)
