"""Ulysses sequence parallelism (`ulysses_sequence_parallel_size`, verl's name).

The packed row of a micro-batch (`packing.py`) is cut into `S` contiguous slices, one per
rank of a sequence-parallel group; every layer runs on its slice except attention, which
needs whole sequences: an all-to-all trades the slice of every head for the whole
sequence of `H / S` heads, `rl_varlen` attends within each packed sequence as usual, and
the inverse all-to-all brings the output back to the slice (DeepSpeed-Ulysses). The
output states are then gathered along the sequence, so the log-probs and the loss are
those of the whole row, on every rank of the group.

Gradients: each rank's backward covers its own slice (the gather's backward keeps the
rank's part of the incoming gradient; the all-to-alls send the rest where it belongs), so
the sum over a group is the whole row's gradient, which the engine's loss scaling turns
into FSDP's average's inverse. The group's ranks see the same rows: data parallelism is
`world / S` (the global batch arithmetic divides by `S`, as ROLL documents).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.distributed as dist

from rl.fsdp.packing import PackedInputs

ATTENTION = "rl_varlen_ulysses"


@dataclass(frozen=True)
class SequenceParallel:
    """This rank's place in its sequence-parallel group."""

    group: Any  # dist.ProcessGroup
    size: int
    rank: int


def _all_to_all(
    x: torch.Tensor, scatter_dim: int, gather_dim: int, sp: SequenceParallel
) -> torch.Tensor:
    inputs = [t.contiguous() for t in x.chunk(sp.size, dim=scatter_dim)]
    outputs = [torch.empty_like(inputs[0]) for _ in range(sp.size)]
    dist.all_to_all(outputs, inputs, group=sp.group)
    return torch.cat(outputs, dim=gather_dim)


class AllToAll(torch.autograd.Function):
    """Scatter `scatter_dim` over the group, gather `gather_dim`; the backward is the inverse."""

    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, scatter_dim: int, gather_dim: int, sp: SequenceParallel
    ) -> torch.Tensor:
        ctx.dims, ctx.sp = (scatter_dim, gather_dim), sp
        return _all_to_all(x, scatter_dim, gather_dim, sp)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        scatter_dim, gather_dim = ctx.dims
        return _all_to_all(grad, gather_dim, scatter_dim, ctx.sp), None, None, None


class GatherSequence(torch.autograd.Function):
    """Every rank's slice of `dim`, concatenated; the backward keeps this rank's part of
    the gradient (each rank computes the same loss from the gathered whole)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, dim: int, sp: SequenceParallel) -> torch.Tensor:
        ctx.dim, ctx.sp, ctx.length = dim, sp, x.shape[dim]
        parts = [torch.empty_like(x) for _ in range(sp.size)]
        dist.all_gather(parts, x.contiguous(), group=sp.group)
        return torch.cat(parts, dim=dim)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        start = ctx.sp.rank * ctx.length
        return grad.narrow(ctx.dim, start, ctx.length).contiguous(), None, None


class ShareGradient(torch.autograd.Function):
    """Identity whose backward divides by the group size: for a weight applied after the
    gather (the fused path's LM head), where every rank of the group computes the whole
    row's gradient, so their sum must count it once."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, sp: SequenceParallel) -> torch.Tensor:
        ctx.size = sp.size
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        return grad / ctx.size, None


def ulysses_attention(
    module: torch.nn.Module,
    query: torch.Tensor,  # [1, H, N / S, D]
    key: torch.Tensor,  # [1, H_kv, N / S, D]
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """`rl_varlen` over whole sequences for H / S heads, between two all-to-alls."""
    from rl.kernels.varlen_attention import varlen_attention

    sp: SequenceParallel = kwargs.pop("sequence_parallel")
    repeats = kv_repeats(key.shape[1], sp.size)
    if repeats > 1:  # fewer key/value heads than ranks: each rank gets copies of its own
        key, value = (t.repeat_interleave(repeats, dim=1) for t in (key, value))
    q, k, v = (AllToAll.apply(t, 1, 2, sp) for t in (query, key, value))  # [1, H/S, N, D]
    out, _ = varlen_attention(module, q, k, v, attention_mask, **kwargs)  # [1, N, H/S, D]
    return AllToAll.apply(out, 1, 2, sp), None  # [1, N/S, H, D]


def register() -> str:
    """Make `rl_varlen_ulysses` an attention implementation transformers can select."""
    from transformers import AttentionInterface

    AttentionInterface.register(ATTENTION, ulysses_attention)
    return ATTENTION


def kv_repeats(kv_heads: int, size: int) -> int:
    """How many copies of each key/value head make their count a multiple of `size`
    (copies of a head stay together, so query head h still reads its own)."""
    return size // math.gcd(kv_heads, size)


def check_heads(config: Any, size: int, key: str) -> None:
    """Attention heads must split over the group, and key/value heads (repeated when fewer
    than the ranks) must still group the query heads evenly."""
    from rl.core.config import ConfigError

    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    if heads % size or heads % (kv_heads * kv_repeats(kv_heads, size)):
        raise ConfigError(
            f"{key} = {size} does not split the model's attention heads ({heads}, key/value "
            f"heads {kv_heads}) evenly; use a divisor of {heads}"
        )


def local_slice(inputs: PackedInputs, sp: SequenceParallel) -> dict[str, Any]:
    """This rank's slice of the packed row as model kwargs.

    The row is padded to a multiple of `S` with a separate dummy sequence (it attends to
    nothing real and is never read back); sequence bounds stay those of the whole row.
    """
    total = inputs.input_ids.shape[1]
    padded = -(-total // sp.size) * sp.size
    pad = padded - total
    ids, positions, bounds = inputs.input_ids, inputs.position_ids, inputs.cu_seqlens
    if pad:
        device = ids.device
        ids = torch.cat([ids, torch.zeros((1, pad), dtype=ids.dtype, device=device)], 1)
        filler = torch.arange(pad, dtype=positions.dtype, device=device)[None]
        positions = torch.cat([positions, filler], 1)
        bounds = torch.cat([bounds, bounds.new_tensor([padded])])
    share = padded // sp.size
    start = sp.rank * share
    whole = replace(inputs, cu_seqlens=bounds, max_seqlen=max(inputs.max_seqlen, pad))
    kwargs = whole.model_kwargs()
    kwargs["input_ids"] = ids[:, start : start + share]
    kwargs["position_ids"] = positions[:, start : start + share]
    kwargs["sequence_parallel"] = sp
    return kwargs


def sequence_parallel_group(device_type: str, size: int) -> SequenceParallel | None:
    """This rank's group of `size` consecutive ranks (None when `size` is 1)."""
    if size == 1:
        return None
    from torch.distributed.device_mesh import init_device_mesh

    world = dist.get_world_size()
    mesh = init_device_mesh(device_type, (world // size, size), mesh_dim_names=("dp", "sp"))
    return SequenceParallel(mesh["sp"].get_group(), size, mesh["sp"].get_local_rank())
