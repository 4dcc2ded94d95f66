import pytest
import torch

from rl.kernels import _backend


@pytest.fixture(params=["reference", "cpp"])
def cpu_impl(request, monkeypatch):
    """Run the test once per CPU implementation, forced through RL_KERNELS_IMPL."""
    if request.param == "cpp" and _backend.compiled_module("_C") is None:
        pytest.fail(f"rl.kernels._C is not built: {_backend.compiled_import_error('_C')}")
    monkeypatch.setenv("RL_KERNELS_IMPL", request.param)
    return request.param


@pytest.fixture
def assert_bitwise_equal():
    """Check two tensors are equal bit for bit (any NaN matches any NaN)."""
    return _assert_bitwise_equal


def _assert_bitwise_equal(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Equal bit for bit, except that any NaN matches any NaN."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    nan = torch.isnan(expected.float())
    assert torch.equal(torch.isnan(actual.float()), nan)
    if actual.dtype == torch.float32:
        bits_a, bits_e = actual.view(torch.int32), expected.view(torch.int32)
    else:
        bits_a, bits_e = actual.view(torch.int16), expected.view(torch.int16)
    mismatch = (bits_a != bits_e) & ~nan
    assert not mismatch.any(), (
        f"{int(mismatch.sum())} elements differ, first at "
        f"{mismatch.nonzero()[0].tolist()}: {actual[mismatch][:4]} vs {expected[mismatch][:4]}"
    )
