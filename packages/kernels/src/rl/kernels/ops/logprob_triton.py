"""Triton epilogues of the fused log-prob op (GPU; CPU under TRITON_INTERPRET=1).

One program per row of the float32 logits tile, looping over its columns in
blocks: the forward folds the tile into the running (max, sum, sum_x, label_x)
statistics, the backward rewrites the tile as d loss / d logits.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _forward_kernel(
    tile_ptr,
    ld,
    labels_ptr,
    col_start,
    scale,
    max_ptr,
    sum_ptr,
    sx_ptr,
    lx_ptr,
    cols,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0)
    base = tile_ptr + row.to(tl.int64) * ld
    old_max = tl.load(max_ptr + row)
    tile_max = float("-inf")
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(base + offs, mask=offs < cols, other=float("-inf")) * scale
        tile_max = tl.maximum(tile_max, tl.max(x, axis=0))
    new_max = tl.maximum(old_max, tile_max)
    rescale = tl.exp(old_max - new_max)
    total = tl.load(sum_ptr + row) * rescale
    total_x = tl.load(sx_ptr + row) * rescale
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        valid = offs < cols
        x = tl.load(base + offs, mask=valid, other=0.0) * scale
        e = tl.where(valid, tl.exp(x - new_max), 0.0)
        total += tl.sum(e, axis=0)
        total_x += tl.sum(e * x, axis=0)
    tl.store(max_ptr + row, new_max)
    tl.store(sum_ptr + row, total)
    tl.store(sx_ptr + row, total_x)
    local = tl.load(labels_ptr + row) - col_start
    if (local >= 0) & (local < cols):
        tl.store(lx_ptr + row, tl.load(base + local) * scale)


@triton.jit
def _backward_kernel(
    tile_ptr,
    ld,
    labels_ptr,
    col_start,
    scale,
    lse_ptr,
    mean_ptr,
    glp_ptr,
    gh_ptr,
    cols,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0)
    base = tile_ptr + row.to(tl.int64) * ld
    lse = tl.load(lse_ptr + row)
    mean_x = tl.load(mean_ptr + row)
    g_lp = tl.load(glp_ptr + row)
    g_h = tl.load(gh_ptr + row)
    local = tl.load(labels_ptr + row) - col_start
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        valid = offs < cols
        x = tl.load(base + offs, mask=valid, other=0.0) * scale
        p = tl.exp(x - lse)
        grad = -g_lp * p - g_h * p * (x - mean_x)
        grad = tl.where(offs == local, grad + g_lp, grad)
        tl.store(base + offs, grad * scale, mask=valid)


def _block(cols: int) -> int:
    return min(4096, triton.next_power_of_2(max(cols, 16)))


def forward_triton(
    tile: torch.Tensor, labels: torch.Tensor, col_start: int, scale: float, stats: torch.Tensor
) -> None:
    rows, cols = tile.shape
    if rows == 0:
        return
    _forward_kernel[(rows,)](
        tile,
        tile.stride(0),
        labels,
        col_start,
        scale,
        stats[0],
        stats[1],
        stats[2],
        stats[3],
        cols,
        BLOCK=_block(cols),
    )


def backward_triton(
    tile: torch.Tensor,
    labels: torch.Tensor,
    col_start: int,
    scale: float,
    lse: torch.Tensor,
    mean_x: torch.Tensor,
    grad_logprob: torch.Tensor,
    grad_entropy: torch.Tensor,
) -> None:
    rows, cols = tile.shape
    if rows == 0:
        return
    _backward_kernel[(rows,)](
        tile,
        tile.stride(0),
        labels,
        col_start,
        scale,
        lse,
        mean_x,
        grad_logprob,
        grad_entropy,
        cols,
        BLOCK=_block(cols),
    )
