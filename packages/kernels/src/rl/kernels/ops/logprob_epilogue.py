"""The per-tile epilogues of the fused log-prob op: torch reference and C++ CPU.

Same contract as csrc/include/rl_kernels/logprob.h: `forward` folds one float32
logits tile [rows, cols] (vocabulary ids col_start ..) into running row
statistics (max, sum exp, sum exp * x, label x); `backward` turns a tile into
d loss / d logits in place. x = logits * scale, scale = 1 / temperature.
"""

from __future__ import annotations

import torch

from rl.kernels import _backend


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
    local = labels - col_start
    inside = (local >= 0) & (local < tile.shape[1])
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
) -> None:
    x = tile * scale
    p = torch.exp(x - lse[:, None])
    grad = -grad_logprob[:, None] * p - grad_entropy[:, None] * p * (x - mean_x[:, None])
    local = labels - col_start
    inside = (local >= 0) & (local < tile.shape[1])
    rows = torch.nonzero(inside)[:, 0]
    grad[rows, local[rows]] += grad_logprob[rows]
    tile.copy_(grad * scale)


def forward_cpp(
    tile: torch.Tensor, labels: torch.Tensor, col_start: int, scale: float, stats: torch.Tensor
) -> None:
    module = _backend.compiled_module("_C")
    assert module is not None
    rows, cols = tile.shape
    module.logprob_tile_forward(
        tile.data_ptr(),
        rows,
        cols,
        tile.stride(0),
        labels.data_ptr(),
        col_start,
        scale,
        stats[0].data_ptr(),
        stats[1].data_ptr(),
        stats[2].data_ptr(),
        stats[3].data_ptr(),
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
) -> None:
    module = _backend.compiled_module("_C")
    assert module is not None
    rows, cols = tile.shape
    module.logprob_tile_backward(
        tile.data_ptr(),
        rows,
        cols,
        tile.stride(0),
        labels.data_ptr(),
        col_start,
        scale,
        lse.data_ptr(),
        mean_x.data_ptr(),
        grad_logprob.data_ptr(),
        grad_entropy.data_ptr(),
        torch.get_num_threads(),
    )
