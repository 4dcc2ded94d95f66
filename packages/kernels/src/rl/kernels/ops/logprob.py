"""Fused log-prob and entropy from hidden states, never materialising [T, V] logits.

`fused_logprob_entropy(hidden [T, H], weight [V, H], labels [T])` returns the
log-probability of each label and the entropy of softmax(hidden @ weight^T / T)
per token (float32), differentiable w.r.t. `hidden` and `weight` through both.

Design: chunked GEMMs with a fused epilogue. Logits are computed one tile
(`token_chunk` × `vocab_chunk`, float32) at a time by torch (BLAS / cuBLAS); an
epilogue (C++ on CPU, Triton on GPU, torch as reference) folds each tile into
online softmax statistics. The backward recomputes each tile and turns it into
d loss / d logits in place before two GEMMs accumulate the input gradients.
Extra memory: O(T) statistics + one tile + an fp32 accumulator for the hidden
gradient. With `tp_group`, each rank holds a contiguous slice of the
vocabulary (rank r: rows r*V_local ..), and the statistics are merged across
the group, so the result equals the unsharded one (the Megatron layout).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.distributed as dist

from rl.kernels import _backend
from rl.kernels.ops import logprob_epilogue as epi

OP_NAME = "logprob"
DEFAULT_TOKEN_CHUNK = 4096
DEFAULT_VOCAB_CHUNK = 8192


def available_impls(device_type: str) -> set[str]:
    impls = {"reference"}
    if device_type == "cpu" and _backend.compiled_module("_C") is not None:
        impls.add("cpp")
    if _backend.triton_usable() and (device_type == "cuda" or _backend.triton_interpreted()):
        impls.add("triton")
    return impls


def _epilogues(device_type: str) -> tuple[Callable[..., None], Callable[..., None]]:
    impl = _backend.choose_impl(OP_NAME, device_type, available_impls(device_type))
    if impl == "cpp":
        return epi.forward_cpp, epi.backward_cpp
    if impl == "triton":
        from rl.kernels.ops import logprob_triton

        return logprob_triton.forward_triton, logprob_triton.backward_triton
    return epi.forward_reference, epi.backward_reference


def _mm_fp32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b with a float32 result.

    On GPU with a 16-bit `b` the GEMM runs on tensor cores in b's dtype with fp32
    accumulation (a float32 `a`, e.g. a gradient tile, is rounded to it first);
    elsewhere both sides are widened to float32.
    """
    if a.dtype == torch.float32 and b.dtype == torch.float32:
        return a @ b
    if a.is_cuda and b.dtype in (torch.bfloat16, torch.float16) and _HAS_MM_OUT_DTYPE:
        return torch.mm(a.to(b.dtype), b, out_dtype=torch.float32)
    return a.float() @ b.float()


def _mm_out_dtype_supported() -> bool:
    """`torch.mm(..., out_dtype=)` (fp32 results of 16-bit GEMMs) exists in this torch."""
    try:
        torch.mm(
            torch.zeros(1, 1, device="meta", dtype=torch.bfloat16),
            torch.zeros(1, 1, device="meta", dtype=torch.bfloat16),
            out_dtype=torch.float32,
        )
    except (TypeError, RuntimeError, NotImplementedError):
        return False
    return True


_HAS_MM_OUT_DTYPE = _mm_out_dtype_supported()


def _check(hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor) -> None:
    if hidden.dim() != 2 or weight.dim() != 2 or hidden.shape[1] != weight.shape[1]:
        raise ValueError(
            f"expected hidden [T, H] and weight [V, H], got {tuple(hidden.shape)} "
            f"and {tuple(weight.shape)}"
        )
    if labels.shape != (hidden.shape[0],):
        raise ValueError(f"labels must be [T] = [{hidden.shape[0]}], got {tuple(labels.shape)}")
    if labels.dtype != torch.int64:
        raise TypeError(f"labels must be int64, got {labels.dtype}")


@torch.library.custom_op("rl_kernels::logprob_stats", mutates_args=())
def logprob_stats(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    labels: torch.Tensor,
    scale: float,
    vocab_start: int,
    token_chunk: int,
    vocab_chunk: int,
) -> torch.Tensor:
    """Row statistics [4, T] float32: max x, sum exp(x - max), sum exp(x - max) x, x_label
    (0 when the label is outside this weight's vocabulary slice); x = hidden @ weight^T * scale."""
    _check(hidden, weight, labels)
    forward, _ = _epilogues(hidden.device.type)
    tokens = hidden.shape[0]
    stats = torch.zeros(4, tokens, dtype=torch.float32, device=hidden.device)
    stats[0] = -math.inf
    labels = labels.contiguous()
    for t0 in range(0, tokens, token_chunk):
        t1 = min(t0 + token_chunk, tokens)
        for v0 in range(0, weight.shape[0], vocab_chunk):
            tile = _mm_fp32(hidden[t0:t1], weight[v0 : v0 + vocab_chunk].t()).contiguous()
            forward(tile, labels[t0:t1], vocab_start + v0, scale, stats[:, t0:t1])
    return stats


@logprob_stats.register_fake
def _(hidden, weight, labels, scale, vocab_start, token_chunk, vocab_chunk):
    return hidden.new_empty((4, hidden.shape[0]), dtype=torch.float32)


@torch.library.custom_op("rl_kernels::logprob_grads", mutates_args=())
def logprob_grads(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    labels: torch.Tensor,
    scale: float,
    vocab_start: int,
    token_chunk: int,
    vocab_chunk: int,
    lse: torch.Tensor,
    mean_x: torch.Tensor,
    grad_logprob: torch.Tensor,
    grad_entropy: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(d loss / d hidden, d loss / d weight) given the upstream gradients per token [T]."""
    _, backward = _epilogues(hidden.device.type)
    tokens = hidden.shape[0]
    grad_hidden = torch.zeros(hidden.shape, dtype=torch.float32, device=hidden.device)
    grad_weight = torch.empty_like(weight)
    labels = labels.contiguous()
    grad_logprob, grad_entropy = (
        grad_logprob.float().contiguous(),
        grad_entropy.float().contiguous(),
    )
    for v0 in range(0, weight.shape[0], vocab_chunk):
        w_chunk = weight[v0 : v0 + vocab_chunk]
        grad_w_chunk = torch.zeros(w_chunk.shape, dtype=torch.float32, device=weight.device)
        for t0 in range(0, tokens, token_chunk):
            t1 = min(t0 + token_chunk, tokens)
            tile = _mm_fp32(hidden[t0:t1], w_chunk.t()).contiguous()
            backward(
                tile,
                labels[t0:t1],
                vocab_start + v0,
                scale,
                lse[t0:t1],
                mean_x[t0:t1],
                grad_logprob[t0:t1],
                grad_entropy[t0:t1],
            )
            grad_hidden[t0:t1] += _mm_fp32(tile, w_chunk)
            grad_w_chunk += _mm_fp32(tile.t(), hidden[t0:t1])
        grad_weight[v0 : v0 + vocab_chunk] = grad_w_chunk
    return grad_hidden.to(hidden.dtype), grad_weight


@logprob_grads.register_fake
def _(
    hidden,
    weight,
    labels,
    scale,
    vocab_start,
    token_chunk,
    vocab_chunk,
    lse,
    mean_x,
    grad_logprob,
    grad_entropy,
):
    return torch.empty_like(hidden), torch.empty_like(weight)


def _merge_across_ranks(stats: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    """Combine per-rank statistics of vocabulary slices into those of the whole vocabulary."""
    global_max = stats[0].clone()
    dist.all_reduce(global_max, op=dist.ReduceOp.MAX, group=group)
    factor = torch.exp(stats[0] - global_max)
    sums = torch.stack([stats[1] * factor, stats[2] * factor, stats[3]])
    dist.all_reduce(sums, op=dist.ReduceOp.SUM, group=group)
    return torch.cat([global_max[None], sums])


class _FusedLogprobEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, labels, temperature, tp_group, token_chunk, vocab_chunk):
        scale = 1.0 / temperature
        rank = dist.get_rank(tp_group) if tp_group is not None else 0
        vocab_start = rank * weight.shape[0]
        stats = logprob_stats(hidden, weight, labels, scale, vocab_start, token_chunk, vocab_chunk)
        vocab_size = weight.shape[0]
        if tp_group is not None:
            stats = _merge_across_ranks(stats, tp_group)
            vocab_size *= dist.get_world_size(tp_group)
        lse = stats[0] + torch.log(stats[1])
        mean_x = stats[2] / stats[1]
        # Rounding can push these a hair past their bounds; the bounds are exact facts.
        logprob = (stats[3] - lse).clamp(max=0.0)
        entropy = (lse - mean_x).clamp(min=0.0, max=math.log(vocab_size))
        ctx.save_for_backward(hidden, weight, labels, lse, mean_x)
        ctx.config = (scale, vocab_start, token_chunk, vocab_chunk, tp_group)
        return logprob, entropy

    @staticmethod
    def backward(ctx, grad_logprob, grad_entropy):
        hidden, weight, labels, lse, mean_x = ctx.saved_tensors
        scale, vocab_start, token_chunk, vocab_chunk, tp_group = ctx.config
        grad_logprob = torch.zeros_like(lse) if grad_logprob is None else grad_logprob
        grad_entropy = torch.zeros_like(lse) if grad_entropy is None else grad_entropy
        grad_hidden, grad_weight = logprob_grads(
            hidden,
            weight,
            labels,
            scale,
            vocab_start,
            token_chunk,
            vocab_chunk,
            lse,
            mean_x,
            grad_logprob,
            grad_entropy,
        )
        if tp_group is not None:  # hidden is replicated: its gradient sums over the slices
            dist.all_reduce(grad_hidden, group=tp_group)
        return grad_hidden, grad_weight, None, None, None, None, None


def fused_logprob_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    labels: torch.Tensor,
    temperature: float = 1.0,
    *,
    entropy: bool = True,
    tp_group: dist.ProcessGroup | None = None,
    token_chunk: int = DEFAULT_TOKEN_CHUNK,
    vocab_chunk: int = DEFAULT_VOCAB_CHUNK,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log p(label) [T] and entropy [T] (float32) of softmax(hidden @ weight^T / temperature).

    hidden [T, H] and weight [V, H] (or this rank's vocabulary slice with `tp_group`)
    in fp32/bf16/fp16; labels [T] int64 (global vocabulary ids). Differentiable
    w.r.t. hidden and weight through both outputs. `entropy=False` returns None
    for it (the statistics are shared, so the forward costs the same).
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if token_chunk < 1 or vocab_chunk < 1:
        raise ValueError("token_chunk and vocab_chunk must be >= 1")
    logprob, ent = _FusedLogprobEntropy.apply(
        hidden, weight, labels, temperature, tp_group, token_chunk, vocab_chunk
    )
    return logprob, (ent if entropy else None)
