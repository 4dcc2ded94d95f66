"""The per-tile epilogues (C++ against torch) and the chunked driver's memory bound, on CPU."""

import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from rl.kernels import _backend
from rl.kernels.ops import logprob_epilogue as epi
from rl.kernels.ops import logprob_tiles as tiles


@pytest.fixture(autouse=True)
def needs_cpp():
    if _backend.compiled_module("_C") is None:
        pytest.fail(f"rl.kernels._C is not built: {_backend.compiled_import_error('_C')}")


def strided_tiles(rows, cols, count, seed):
    """`count` fp32 tiles [rows, cols] that are views with row stride > cols (ld != cols)."""
    g = torch.Generator().manual_seed(seed)
    buffers = [torch.randn(rows, cols + 11, generator=g) * 4 for _ in range(count)]
    return [b[:, 3 : 3 + cols] for b in buffers]


def fresh_stats(rows):
    stats = torch.zeros(4, rows)
    stats[0] = -math.inf
    return stats


def test_cpp_forward_folds_tiles_like_the_torch_reference():
    rows, cols = 13, 29
    tiles_ = strided_tiles(rows, cols, 3, seed=0)
    # Labels in the first, second and third tile and outside all three.
    labels = torch.tensor([0, 28, 29, 40, 57, 58, 87, 100, 5, 31, 60, 86, 3])
    want, got = fresh_stats(rows), fresh_stats(rows)
    for i, tile in enumerate(tiles_):
        epi.forward_reference(tile, labels, i * cols, 0.7, want)
        epi.forward_cpp(tile, labels, i * cols, 0.7, got)
    assert torch.allclose(got, want, rtol=2e-6, atol=1e-6)
    assert got[3][labels == 100].item() == 0.0  # outside every tile: untouched
    logits = torch.cat(tiles_, dim=1) * 0.7
    lse = torch.logsumexp(logits, 1)
    assert torch.allclose(got[0] + got[1].log(), lse, atol=1e-5)


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16])
def test_cpp_backward_writes_the_reference_gradient(out_dtype):
    rows, cols = 9, 23
    tile = strided_tiles(rows, cols, 1, seed=1)[0]
    g = torch.Generator().manual_seed(2)
    labels = torch.randint(40, (rows,), generator=g)  # some outside [10, 33)
    lse = torch.logsumexp(tile * 1.3, 1) + 0.5  # as if other tiles existed
    mean_x, g_lp, g_h = (torch.randn(rows, generator=g) for _ in range(3))
    args = (labels, 10, 1.3, lse, mean_x, g_lp, g_h)
    want = torch.empty(rows, cols, dtype=out_dtype)
    epi.backward_reference(tile.clone(), *args, want)
    tile_cpp = tile.clone()
    out = tile_cpp if out_dtype == torch.float32 else torch.empty(rows, cols, dtype=out_dtype)
    epi.backward_cpp(tile_cpp, *args, out)
    tolerance = 1e-6 if out_dtype == torch.float32 else 1e-2
    assert torch.allclose(out.float(), want.float(), rtol=tolerance, atol=tolerance)


class LargestTensor(TorchDispatchMode):
    """Records the largest tensor any torch op produces while active."""

    def __init__(self):
        super().__init__()
        self.numel = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        sizes = [t.numel() for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        self.numel = max([self.numel, *sizes])
        return out


def test_chunked_driver_never_holds_full_logits():
    tokens, hidden_size, vocab, token_chunk, vocab_chunk = 128, 8, 2000, 16, 128
    g = torch.Generator().manual_seed(3)
    hidden = torch.randn(tokens, hidden_size, generator=g)
    weight = torch.randn(vocab, hidden_size, generator=g)
    labels = torch.randint(vocab, (tokens,), generator=g)
    tiling = tiles.Tiling(1.0, 0, token_chunk, vocab_chunk)
    with LargestTensor() as forward:
        stats = tiles.tiled_stats(hidden, weight, labels, tiling, epi.forward_cpp)
    lse, mean_x = stats[0] + stats[1].log(), stats[2] / stats[1]
    dlogits = tiles.dlogits_from_tiles(epi.backward_cpp)
    ones = torch.ones(tokens)
    per_row = tiles.RowGrads(lse, mean_x, ones, ones)
    with LargestTensor() as backward:
        tiles.chunked_grads(hidden, weight, labels, tiling, per_row, dlogits, torch.float32)
    # Allowed: one tile, and the inputs' own sizes (gradients); never T × V.
    allowed = max(token_chunk * vocab_chunk, vocab * hidden_size)
    assert forward.numel <= token_chunk * vocab_chunk
    assert backward.numel <= allowed < tokens * vocab // 8
