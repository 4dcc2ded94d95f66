"""`square_sum`: the float64 sum of squares, a block at a time, equals the whole tensor's
float64 sum (to float64 rounding) and never makes a float64 copy of the whole."""

import torch

from rl.core.norms import square_sum


def test_equals_the_float64_sum_over_blocks_of_any_size():
    values = torch.randn(3001, 7, generator=torch.Generator().manual_seed(0)) * 1e3
    want = values.double().pow(2).sum()
    for block in (1, 1000, 3001 * 7, 1 << 20):
        got = square_sum(values, block)
        assert got.dtype == torch.float64 and got.dim() == 0
        assert torch.allclose(got, want, rtol=1e-13, atol=0)
    assert square_sum(torch.zeros(0)).item() == 0.0


def test_the_largest_float64_temporary_is_one_block(monkeypatch):
    sizes = []
    original = torch.Tensor.double

    def double(self):
        sizes.append(self.numel())
        return original(self)

    monkeypatch.setattr(torch.Tensor, "double", double)
    square_sum(torch.ones(10_000), block=256)
    assert sizes and max(sizes) == 256
