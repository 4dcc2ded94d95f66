"""The per-tile epilogues of the fused log-prob op: torch reference, C++ CPU, CUDA.

Same contract as csrc/include/rl_kernels/logprob.h: `forward` folds one float32
logits tile [rows, cols] (vocabulary ids col_start ..) into running row
statistics [4, rows] = (max x, sum exp(x - max), sum exp(x - max) x, label x);
`backward` writes d loss / d logits of the tile into `out` (the tile itself for
float32, or a 16-bit buffer the next GEMMs read). x = logits * scale,
scale = 1 / temperature.
"""

from __future__ import annotations

from types import ModuleType

import torch

from rl.kernels import _backend
from rl.kernels._dtypes import dtype_code
from rl.kernels.ops.logprob_tiles import BackwardEpilogue, ForwardEpilogue


def _label_columns(
    labels: torch.Tensor, col_start: int, cols: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(each row's label as a column of this tile [rows], whether it falls inside [rows])."""
    local = labels - col_start
    return local, (local >= 0) & (local < cols)


def forward_reference(
    tile: torch.Tensor, labels: torch.Tensor, col_start: int, scale: float, stats: torch.Tensor
) -> None:
    """`stats` [4, rows] float32 = (max, sum, sum_x, label_x), updated in place."""
    x = tile * scale
    tile_max = x.max(dim=1).values
    new_max = torch.maximum(stats[0], tile_max)
    rescale = torch.exp(stats[0] - new_max)
    e = torch.exp(x - new_max[:, None])
    stats[1] = stats[1] * rescale + e.sum(1)
    stats[2] = stats[2] * rescale + (e * x).sum(1)
    stats[0] = new_max
    local, inside = _label_columns(labels, col_start, tile.shape[1])
    picked = x.gather(1, local.clamp(0, tile.shape[1] - 1)[:, None])[:, 0]
    stats[3] = torch.where(inside, picked, stats[3])


def backward_reference(
    tile: torch.Tensor,
    labels: torch.Tensor,
    col_start: int,
    scale: float,
    lse: torch.Tensor,
    mean_x: torch.Tensor,
    grad_logprob: torch.Tensor,
    grad_entropy: torch.Tensor,
    out: torch.Tensor,
) -> None:
    """d/dx_j = g_lp (1[j = label] - p_j) - g_H p_j (x_j - mean_x); d/dz = d/dx * scale."""
    x = tile * scale
    p = torch.exp(x - lse[:, None])
    grad = -grad_logprob[:, None] * p - grad_entropy[:, None] * p * (x - mean_x[:, None])
    local, inside = _label_columns(labels, col_start, tile.shape[1])
    rows = torch.nonzero(inside)[:, 0]
    grad[rows, local[rows]] += grad_logprob[rows]
    out.copy_(grad * scale)


def _module(name: str) -> ModuleType:
    module = _backend.compiled_module(name)
    assert module is not None, f"rl.kernels.{name} is not built"
    return module


def _tile_args(tile: torch.Tensor, labels: torch.Tensor, col_start: int, scale: float) -> tuple:
    """The leading arguments of every compiled epilogue (logprob.h): the tile, its rows,
    columns and row stride, the labels, the tile's first vocabulary id and the scale. The
    compiled code reads raw pointers: a tile of another dtype or layout is refused here."""
    if tile.dtype != torch.float32 or tile.stride(1) != 1:
        raise TypeError(
            f"the compiled epilogues read a float32 tile with contiguous rows, got "
            f"{tile.dtype} with strides {tuple(tile.stride())}"
        )
    if labels.dtype != torch.int64 or not labels.is_contiguous():
        raise TypeError(f"the compiled epilogues read contiguous int64 labels, got {labels.dtype}")
    rows, cols = tile.shape
    return (tile.data_ptr(), rows, cols, tile.stride(0), labels.data_ptr(), col_start, scale)


def _pointers(*tensors: torch.Tensor) -> tuple[int, ...]:
    return tuple(tensor.data_ptr() for tensor in tensors)


def forward_cpp(
    tile: torch.Tensor, labels: torch.Tensor, col_start: int, scale: float, stats: torch.Tensor
) -> None:
    _module("_C").logprob_tile_forward(
        *_tile_args(tile, labels, col_start, scale),
        *_pointers(*stats[:4]),
        torch.get_num_threads(),
    )


def backward_cpp(
    tile: torch.Tensor,
    labels: torch.Tensor,
    col_start: int,
    scale: float,
    lse: torch.Tensor,
    mean_x: torch.Tensor,
    grad_logprob: torch.Tensor,
    grad_entropy: torch.Tensor,
    out: torch.Tensor,
) -> None:
    """The C++ epilogue works in place on the fp32 tile; `out` gets a copy if it is not the tile."""
    _module("_C").logprob_tile_backward(
        *_tile_args(tile, labels, col_start, scale),
        *_pointers(lse, mean_x, grad_logprob, grad_entropy),
        torch.get_num_threads(),
    )
    if out.data_ptr() != tile.data_ptr():
        out.copy_(tile)


def _stream(tensor: torch.Tensor) -> int:
    return torch.cuda.current_stream(tensor.device).cuda_stream


def forward_cuda(
    tile: torch.Tensor, labels: torch.Tensor, col_start: int, scale: float, stats: torch.Tensor
) -> None:
    _module("_C_cuda").logprob_tile_forward(
        *_tile_args(tile, labels, col_start, scale),
        *_pointers(*stats[:4]),
        _stream(tile),
    )


def backward_cuda(
    tile: torch.Tensor,
    labels: torch.Tensor,
    col_start: int,
    scale: float,
    lse: torch.Tensor,
    mean_x: torch.Tensor,
    grad_logprob: torch.Tensor,
    grad_entropy: torch.Tensor,
    out: torch.Tensor,
) -> None:
    _module("_C_cuda").logprob_tile_backward(
        *_tile_args(tile, labels, col_start, scale),
        *_pointers(lse, mean_x, grad_logprob, grad_entropy, out),
        dtype_code(out.dtype, "logits gradient"),
        out.stride(0),
        _stream(tile),
    )


EPILOGUES: dict[str, tuple[ForwardEpilogue, BackwardEpilogue]] = {
    "reference": (forward_reference, backward_reference),
    "cpp": (forward_cpp, backward_cpp),
    "cuda": (forward_cuda, backward_cuda),
}
