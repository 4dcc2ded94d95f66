"""Fused log-prob and entropy from hidden states, never materialising [T, V] logits.

`fused_logprob_entropy(hidden [T, H], weight [V, H], labels [T])` returns the
log-probability of each label and the entropy of softmax(hidden @ weight^T / T)
per token (float32), differentiable w.r.t. `hidden` and `weight` through both.

Two designs, one contract (per-row statistics max x, sum exp, sum exp * x, x_label):
- tiles (`reference`, `cpp`, `cuda`): torch computes one float32 logits tile
  (`token_chunk` × `vocab_chunk`) at a time with BLAS / cuBLAS and an epilogue folds
  it into online softmax statistics (logprob_tiles.py, logprob_epilogue.py). Any
  GEMM library at full speed, and the C++/CUDA code stays free of GEMMs.
- fused (`triton`): the logits GEMM and the softmax run in one Triton kernel, so
  no logits reach memory (logprob_triton.py; why: see there).
The backward recomputes logits chunk by chunk, turns them into d loss / d logits
and lets two GEMMs accumulate the input gradients. Extra memory: O(T) statistics,
one chunk of logits (or of their gradient), and an fp32 accumulator for the hidden
gradient. With `tp_group`, each rank holds a contiguous slice of the vocabulary
(rank r: rows r*V_local ..) and the statistics are merged across the group, so the
result equals the unsharded one (the Megatron layout).
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from rl.kernels import _backend
from rl.kernels.ops import logprob_tiles as tiles
from rl.kernels.ops.logprob_epilogue import EPILOGUES

OP_NAME = "logprob"
DEFAULT_TOKEN_CHUNK = 4096
DEFAULT_VOCAB_CHUNK = 8192
# On CPU a 1024 x 4096 fp32 tile (16 MiB) stays under glibc's largest mmap threshold
# (32 MiB): a freed tile is reused from the heap instead of being unmapped and faulted in
# again, page by page, for the next one (4096 x 8192 is 128 MiB). At T = 1024, H = 896 and
# Qwen2.5's vocabulary the forward and backward took 6.2 s against 6.5 s, with half the
# page faults (benchmarks/results/grpo_step_qwen05).
CPU_TOKEN_CHUNK = 1024
CPU_VOCAB_CHUNK = 4096


def default_chunks(device: torch.device) -> tuple[int, int]:
    """(token_chunk, vocab_chunk) of the tiles on `device` when the caller names none."""
    if device.type == "cpu":
        return CPU_TOKEN_CHUNK, CPU_VOCAB_CHUNK
    return DEFAULT_TOKEN_CHUNK, DEFAULT_VOCAB_CHUNK


# On GPU the fused Triton kernels come first: their logic is the only GPU code
# exercised off-GPU (TRITON_INTERPRET=1 in the tests); the GPU benchmark may
# reorder this once it has measured both designs.
_PREFERENCE = {"cuda": ("triton", "cuda", "reference")}


def available_impls(device_type: str) -> set[str]:
    """Implementations of this op usable on `device_type` in this process."""
    impls = _backend.compiled_impls(device_type)
    if _backend.triton_usable() and (device_type == "cuda" or _backend.triton_interpreted()):
        impls.add("triton")
    return impls


def chosen_impl(device_type: str) -> str:
    """The implementation `fused_logprob_entropy` runs on `device_type` (RL_KERNELS_IMPL wins)."""
    return _backend.choose_impl(OP_NAME, device_type, available_impls(device_type), _PREFERENCE)


def _check(hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor) -> None:
    if hidden.dim() != 2 or weight.dim() != 2 or hidden.shape[1] != weight.shape[1]:
        raise ValueError(
            f"expected hidden [T, H] and weight [V, H], got {tuple(hidden.shape)} "
            f"and {tuple(weight.shape)}"
        )
    if weight.shape[0] == 0:
        raise ValueError("weight has no vocabulary rows (V = 0)")
    if labels.shape != (hidden.shape[0],):
        raise ValueError(f"labels must be [T] = [{hidden.shape[0]}], got {tuple(labels.shape)}")
    if labels.dtype != torch.int64:
        raise TypeError(f"labels must be int64, got {labels.dtype}")
    for name, tensor in (("hidden", hidden), ("weight", weight)):
        if tensor.dtype not in (torch.float32, torch.bfloat16, torch.float16):
            raise TypeError(f"{name} must be float32, bfloat16 or float16, got {tensor.dtype}")
    if not hidden.device == weight.device == labels.device:
        raise ValueError(
            f"hidden, weight and labels must be on one device, got {hidden.device}, "
            f"{weight.device} and {labels.device}"
        )


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
    impl = chosen_impl(hidden.device.type)
    labels = labels.contiguous()
    if impl == "triton":
        from rl.kernels.ops import logprob_triton

        return logprob_triton.stats(hidden, weight, labels, scale, vocab_start, vocab_chunk)
    tiling = tiles.Tiling(scale, vocab_start, token_chunk, vocab_chunk)
    with _no_autocast(hidden):
        return tiles.tiled_stats(hidden, weight, labels, tiling, EPILOGUES[impl][0])


def _no_autocast(hidden: torch.Tensor) -> torch.autocast:
    """The tiles' GEMMs in the dtypes `mm_fp32` chooses, whatever autocast the caller runs
    under (a model's forward with RLinf's `amp_autocast`): autocast would turn them into
    16-bit GEMMs whose tiles the float32 epilogues cannot read."""
    return torch.autocast(hidden.device.type, enabled=False)


@logprob_stats.register_fake
def _(hidden, *_):
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
    """(d loss / d hidden [T, H], d loss / d weight [V, H]) in their input dtypes, given
    lse and mean_x [T] from the forward and the upstream gradients [T] of logprob and entropy."""
    impl = chosen_impl(hidden.device.type)
    if impl == "triton":
        from rl.kernels.ops import logprob_triton

        dlogits, dtype = logprob_triton.dlogits, weight.dtype
    else:
        # On GPU the gradient tile is written in the GEMMs' 16-bit dtype (no cast pass);
        # CPU GEMMs run in fp32, so there it stays fp32 and is overwritten in place.
        dlogits = tiles.dlogits_from_tiles(EPILOGUES[impl][1])
        dtype = weight.dtype if weight.is_cuda else torch.float32
    tiling = tiles.Tiling(scale, vocab_start, token_chunk, vocab_chunk)
    per_row = (t.float().contiguous() for t in (lse, mean_x, grad_logprob, grad_entropy))
    with _no_autocast(hidden):
        return tiles.chunked_grads(
            hidden, weight, labels.contiguous(), tiling, tiles.RowGrads(*per_row), dlogits, dtype
        )


@logprob_grads.register_fake
def _(hidden, weight, *_):
    return torch.empty_like(hidden), torch.empty_like(weight)


def _merge_across_ranks(stats: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    """Combine per-rank statistics of vocabulary slices into those of the whole vocabulary."""
    global_max = stats[0].clone()
    dist.all_reduce(global_max, op=dist.ReduceOp.MAX, group=group)
    sums = torch.cat([tiles.rebased_sums(stats, global_max), stats[3:]])
    dist.all_reduce(sums, op=dist.ReduceOp.SUM, group=group)
    return torch.cat([global_max[None], sums])


def _finish(
    stats: torch.Tensor, vocab_size: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """log p(label), entropy, logsumexp and mean logit [T] from the row statistics."""
    lse = stats[0] + torch.log(stats[1])
    mean_x = stats[2] / stats[1]
    # Rounding can push these a hair past their bounds; the bounds are exact facts.
    logprob = (stats[3] - lse).clamp(max=0.0)
    entropy = (lse - mean_x).clamp(min=0.0, max=math.log(vocab_size))
    return logprob, entropy, lse, mean_x


def logprob_of_logits(
    logits: torch.Tensor, labels: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """`fused_logprob_entropy`'s log p(label) [T] on CPU, from logits [T, V] (float32)
    already computed: the op's own epilogue over its own vocabulary chunks, so where the
    logits are the values of the op's tiles (a batch-invariant GEMM, `rl.kernels.invariant`)
    the result is the op's, bit for bit, without a second pass over the LM head."""
    if logits.device.type != "cpu" or logits.dtype != torch.float32 or logits.dim() != 2:
        raise TypeError("logprob_of_logits takes CPU float32 logits [T, V]")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    labels = labels.contiguous()
    impl = chosen_impl("cpu")
    if impl not in EPILOGUES:
        raise RuntimeError(f"logprob_of_logits runs the CPU epilogues, not the {impl} kernels")
    tiling = tiles.Tiling(1.0 / temperature, 0, *default_chunks(logits.device))
    stats = tiles.stats_over_tiles(
        *logits.shape,
        lambda rows: lambda cols: logits[rows, cols].contiguous(),
        labels,
        tiling,
        EPILOGUES[impl][0],
    )
    return _finish(stats, logits.shape[1])[0]


class _FusedLogprobEntropy(torch.autograd.Function):
    """Autograd over the two custom ops. An autograd.Function rather than
    `register_autograd` on one op because the vocab-parallel reductions (collectives
    on a ProcessGroup, which no op schema can carry) sit between the statistics and
    the outputs; torch.compile traces it and keeps the two ops opaque."""

    @staticmethod
    def forward(ctx, hidden, weight, labels, temperature, tp_group, token_chunk, vocab_chunk):
        rank = dist.get_rank(tp_group) if tp_group is not None else 0
        tiling = tiles.Tiling(1.0 / temperature, rank * weight.shape[0], token_chunk, vocab_chunk)
        stats = logprob_stats(hidden, weight, labels, *tiling)
        vocab_size = weight.shape[0]
        if tp_group is not None:
            stats = _merge_across_ranks(stats, tp_group)
            vocab_size *= dist.get_world_size(tp_group)
        logprob, entropy, lse, mean_x = _finish(stats, vocab_size)
        ctx.save_for_backward(hidden, weight, labels, lse, mean_x)
        ctx.tiling, ctx.tp_group = tiling, tp_group
        return logprob, entropy

    @staticmethod
    def backward(ctx, grad_logprob, grad_entropy):
        hidden, weight, labels, lse, mean_x = ctx.saved_tensors
        grad_logprob = torch.zeros_like(lse) if grad_logprob is None else grad_logprob
        grad_entropy = torch.zeros_like(lse) if grad_entropy is None else grad_entropy
        grad_hidden, grad_weight = logprob_grads(
            hidden, weight, labels, *ctx.tiling, lse, mean_x, grad_logprob, grad_entropy
        )
        if ctx.tp_group is not None:  # hidden is replicated: its gradient sums over the slices
            dist.all_reduce(grad_hidden, group=ctx.tp_group)
        return grad_hidden, grad_weight, None, None, None, None, None


def fused_logprob_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    labels: torch.Tensor,
    temperature: float = 1.0,
    *,
    entropy: bool = True,
    tp_group: dist.ProcessGroup | None = None,
    token_chunk: int | None = None,
    vocab_chunk: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log p(label) [T] and entropy [T] (float32) of softmax(hidden @ weight^T / temperature).

    hidden [T, H] and weight [V, H] (or this rank's vocabulary slice with `tp_group`)
    in fp32/bf16/fp16; labels [T] int64 (global vocabulary ids). Differentiable
    w.r.t. hidden and weight through both outputs. `entropy=False` returns None
    for it (the statistics are shared, so the forward costs the same).
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    default_tokens, default_vocab = default_chunks(hidden.device)
    token_chunk = default_tokens if token_chunk is None else token_chunk
    vocab_chunk = default_vocab if vocab_chunk is None else vocab_chunk
    if token_chunk < 1 or vocab_chunk < 1:
        raise ValueError("token_chunk and vocab_chunk must be >= 1")
    logprob, ent = _FusedLogprobEntropy.apply(
        hidden, weight, labels, temperature, tp_group, token_chunk, vocab_chunk
    )
    return logprob, (ent if entropy else None)
