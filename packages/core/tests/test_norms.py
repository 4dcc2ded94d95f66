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


def test_square_sums_joins_small_tensors_and_equals_float64():
    """Tensors under the block are joined (a block's worth at a time), big ones go alone:
    either way the float64 sum of squares of every value, none counted twice or left out."""
    from rl.core.norms import square_sums

    generator = torch.Generator().manual_seed(0)
    shapes = [(7,), (30, 3), (250,), (1,), (64, 2), (99,), (5, 5), (300, 4)]
    tensors = [torch.randn(shape, generator=generator) * 100 for shape in shapes]
    want = sum(float((t.double() ** 2).sum()) for t in tensors)
    for block in (100, 128, 1 << 20):
        got = square_sums(tensors, block=block)
        assert got.dtype == torch.float64 and got.dim() == 0
        assert abs(float(got) - want) <= 1e-12 * want, block
    assert float(square_sums([])) == 0.0
