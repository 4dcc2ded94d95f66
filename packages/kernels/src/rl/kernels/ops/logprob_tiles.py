"""The chunked-GEMM driver of the fused log-prob op: logits one tile at a time.

torch computes each float32 logits tile (BLAS on CPU, cuBLAS on GPU) and an
epilogue (torch, C++ or CUDA: logprob_epilogue.py) consumes it, so at most one
`token_chunk × vocab_chunk` tile exists at a time. The backward, shared with
the fused Triton path, gets d loss / d logits one tile at a time and lets two
GEMMs accumulate the input gradients in float32.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from typing import NamedTuple

import torch

from rl.kernels.invariant import pad_rows

HALF_DTYPES = (torch.bfloat16, torch.float16)

# (tile, labels, col_start, scale, stats [4, rows]) -> None, updating stats in place.
ForwardEpilogue = Callable[[torch.Tensor, torch.Tensor, int, float, torch.Tensor], None]
# (tile, labels, col_start, scale, lse, mean_x, grad_logprob, grad_entropy, out) -> None.
BackwardEpilogue = Callable[..., None]


class Tiling(NamedTuple):
    """The arguments both passes share: x = logits * `scale`; this weight's first row is
    vocabulary id `vocab_start`; tiles of at most `token_chunk` × `vocab_chunk` logits."""

    scale: float
    vocab_start: int
    token_chunk: int
    vocab_chunk: int


class RowGrads(NamedTuple):
    """What the backward needs per token row, each [T] float32: the forward's lse and
    mean_x, and the upstream gradients of logprob and entropy (the epilogues' order)."""

    lse: torch.Tensor
    mean_x: torch.Tensor
    grad_logprob: torch.Tensor
    grad_entropy: torch.Tensor

    def rows(self, rows: slice) -> RowGrads:
        return RowGrads(*(tensor[rows] for tensor in self))


# (hidden [t, H], weight [v, H], labels [t], col_start, scale, RowGrads of [t], dtype)
#   -> d loss / d logits [t, v] in `dtype`.
DlogitsFn = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, int, float, RowGrads, torch.dtype], torch.Tensor
]


def rebased_sums(stats: torch.Tensor, top: torch.Tensor) -> torch.Tensor:
    """(sum exp, sum exp * x) [..., 2, T] of statistics [..., 4, T] taken relative to the
    larger max `top` [T]: how partial statistics (vocabulary slices of one kernel launch,
    or of tensor-parallel ranks) are brought to a common max before they are added."""
    return stats[..., 1:3, :] * torch.exp(stats[..., 0, :] - top)[..., None, :]


def chunks(total: int, size: int) -> Iterator[slice]:
    """Consecutive slices of at most `size` covering range(total): the tiling of both passes."""
    for start in range(0, total, size):
        yield slice(start, min(start + size, total))


@functools.cache
def _cuda_gemm_support(device_index: int) -> tuple[bool, bool]:
    """(mm, addmm in place) of 16-bit factors into float32 work on this GPU's torch.

    Probed once on a 2×2 product, because the `out_dtype` overloads exist (with
    meta kernels) in torch releases whose CUDA kernels still reject a float32
    accumulator; a wrong guess would fail mid-backward.
    """
    device = torch.device("cuda", device_index)
    eye = torch.eye(2, dtype=torch.bfloat16, device=device)
    expected = torch.tensor([[2.0, 1.0], [1.0, 2.0]], device=device)
    try:
        mm_ok = bool(torch.equal(torch.mm(eye, eye, out_dtype=torch.float32), eye.float()))
    except (TypeError, RuntimeError, NotImplementedError):
        return False, False
    try:
        acc = torch.ones(2, 2, device=device)
        torch.addmm(acc, eye, eye, out_dtype=torch.float32, out=acc)
        addmm_ok = bool(torch.equal(acc, expected))
    except (TypeError, RuntimeError, NotImplementedError):
        addmm_ok = False
    return mm_ok, addmm_ok


def _fast_cuda(a: torch.Tensor, b: torch.Tensor) -> tuple[bool, bool]:
    if not (a.is_cuda and b.dtype in HALF_DTYPES):
        return False, False
    return _cuda_gemm_support(a.device.index if a.device.index is not None else 0)


def mm_fp32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a [M, K] @ b [K, N] as float32.

    On GPU with a 16-bit `b` the GEMM runs on tensor cores in b's dtype with fp32
    accumulation and an fp32 result (a float32 `a` is rounded to b's dtype first);
    elsewhere both sides are widened to float32.
    """
    if a.dtype == torch.float32 and b.dtype == torch.float32:
        return a @ b
    if _fast_cuda(a, b)[0]:
        return torch.mm(a.to(b.dtype), b, out_dtype=torch.float32)
    return a.float() @ b.float()


def addmm_fp32_(acc: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    """acc [M, N] float32 += a [M, K] @ b [K, N], without a temporary where torch allows.

    The input gradients are sums over many chunks: accumulating in place in fp32
    avoids both a rounding per chunk and an [M, N] temporary per chunk.
    """
    if _fast_cuda(a, b)[1]:
        torch.addmm(acc, a.to(b.dtype), b, out_dtype=torch.float32, out=acc)
    elif a.is_cuda and b.dtype in HALF_DTYPES:
        acc += mm_fp32(a, b)
    else:
        acc.addmm_(a.float(), b.float())


def tiled_stats(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    labels: torch.Tensor,
    tiling: Tiling,
    epilogue: ForwardEpilogue,
) -> torch.Tensor:
    """Row statistics [4, T] float32 (see `logprob_stats`), one logits tile at a time."""

    def row_tiles(rows: slice) -> Callable[[slice], torch.Tensor]:
        # a short chunk gets zero rows up to MIN_ROWS: with fewer the BLAS reduces in
        # another order, and a row's log-prob would depend on how many share its chunk
        part, count = pad_rows(hidden[rows])
        return lambda cols: mm_fp32(part, weight[cols].t())[:count].contiguous()

    return stats_over_tiles(hidden.shape[0], weight.shape[0], row_tiles, labels, tiling, epilogue)


def stats_over_tiles(
    tokens: int,
    vocab: int,
    row_tiles: Callable[[slice], Callable[[slice], torch.Tensor]],
    labels: torch.Tensor,
    tiling: Tiling,
    epilogue: ForwardEpilogue,
) -> torch.Tensor:
    """Row statistics [4, tokens] float32 folded by `epilogue` over the fp32 logits tiles
    `row_tiles(rows)(cols)`, in the op's chunk order."""
    scale, vocab_start, token_chunk, vocab_chunk = tiling
    stats = torch.zeros(4, tokens, dtype=torch.float32, device=labels.device)
    stats[0] = -math.inf
    for rows in chunks(tokens, token_chunk):
        tile_of = row_tiles(rows)
        for cols in chunks(vocab, vocab_chunk):
            epilogue(tile_of(cols), labels[rows], vocab_start + cols.start, scale, stats[:, rows])
    return stats


def dlogits_from_tiles(epilogue: BackwardEpilogue) -> DlogitsFn:
    """A `DlogitsFn` that recomputes the fp32 tile by GEMM and runs `epilogue` on it."""

    def dlogits(
        hidden: torch.Tensor,
        weight: torch.Tensor,
        labels: torch.Tensor,
        col_start: int,
        scale: float,
        per_row: RowGrads,
        dtype: torch.dtype,
    ) -> torch.Tensor:
        tile = mm_fp32(hidden, weight.t()).contiguous()
        # fp32: overwrite the tile in place; 16-bit: one write in the GEMMs' dtype.
        out = tile if dtype == torch.float32 else torch.empty_like(tile, dtype=dtype)
        epilogue(tile, labels, col_start, scale, *per_row, out)
        return out

    return dlogits


def chunked_grads(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    labels: torch.Tensor,
    tiling: Tiling,
    per_row: RowGrads,
    dlogits: DlogitsFn,
    dlogits_dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(d loss / d hidden [T, H] in hidden's dtype, d loss / d weight [V, H] in weight's).

    Vocabulary-outer loop: each weight-gradient slice is finished (and cast) before
    the next starts, so the only full-size fp32 buffer is the hidden gradient's. An fp32
    weight's gradient slices are accumulated where they end up (no zeroed scratch slice
    and no copy: two passes over a [V, H] tensor fewer).
    """
    scale, vocab_start, token_chunk, vocab_chunk = tiling
    grad_hidden = torch.zeros(hidden.shape, dtype=torch.float32, device=hidden.device)
    grad_weight = torch.empty_like(weight)
    in_place = weight.dtype == torch.float32
    if in_place and hidden.shape[0] == 0:
        grad_weight.zero_()
    for cols in chunks(weight.shape[0], vocab_chunk):
        w_chunk = weight[cols]
        if in_place:  # the first token chunk's product is written, later ones added
            grad_w_chunk = grad_weight[cols]
        else:
            grad_w_chunk = torch.zeros(w_chunk.shape, dtype=torch.float32, device=weight.device)
        for rows in chunks(hidden.shape[0], token_chunk):
            d_logits = dlogits(
                hidden[rows],
                w_chunk,
                labels[rows],
                vocab_start + cols.start,
                scale,
                per_row.rows(rows),
                dlogits_dtype,
            )
            addmm_fp32_(grad_hidden[rows], d_logits, w_chunk)
            if in_place and rows.start == 0:
                torch.mm(d_logits.t(), hidden[rows].float(), out=grad_w_chunk)
            else:
                addmm_fp32_(grad_w_chunk, d_logits.t(), hidden[rows])
        if not in_place:
            grad_weight[cols] = grad_w_chunk
    return grad_hidden.to(hidden.dtype), grad_weight
