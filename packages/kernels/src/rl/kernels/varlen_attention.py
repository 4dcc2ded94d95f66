"""Attention over packed rows without an [N, N] mask: `rl_varlen`.

Packed, a micro-batch is one row of N tokens holding many sequences. Hugging Face's
`sdpa` path then builds a block-diagonal causal mask of N x N and attends over all N
keys per query (cost ~N^2, more than the padded batch's B * L^2 once N >> L). `rl_varlen`
attends within each sequence only (cost sum(L_i^2)): `flash_attn_varlen_func` on GPU when
flash-attn is installed, else causal SDPA over buckets of sequences of similar length
(few calls, at most 1.25x the exact attention work). The sequence bounds
come from `cu_seq_lens_q` / `max_length_q`, which the caller passes to the model call
and transformers hands to the attention function (its flash-attention kwargs).

Shared prompts (rl-fsdp's prefix grouping): the packed row holds a prompt once for the
several sequences that start with it. The caller then also passes `rl_sequence_index`
(each sequence's tokens as packed positions, sequences back to back as `cu_seq_lens_q`
bounds them) and `rl_owned` (the positions whose output a sequence writes: each packed
position is owned by exactly one). Attention runs over the gathered sequences, so each
one sees its whole prompt, and each packed position gets its owner's output.

`register()` makes it selectable with `model.set_attn_implementation("rl_varlen")`
(transformers is imported only then: rl-kernels does not depend on it).
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from rl.kernels.gather import take

NAME = "rl_varlen"


def varlen_attention(
    module: torch.nn.Module,
    query: torch.Tensor,  # [1, H, N, D]
    key: torch.Tensor,  # [1, H_kv, N, D]
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Causal attention within each packed sequence; returns [1, N, H, D] as HF expects."""
    cu_seqlens = kwargs.get("cu_seq_lens_q")
    if cu_seqlens is None or query.shape[0] != 1:
        raise ValueError(
            "rl_varlen attention needs one packed row and cu_seq_lens_q (the packed sequence bounds)"
        )
    index, owned = kwargs.get("rl_sequence_index"), kwargs.get("rl_owned")
    if query.is_cuda and _flash_varlen() is not None:
        if index is None:
            return _flash(query, key, value, cu_seqlens, kwargs["max_length_q"], scaling), None
        q, k, v = (t[:, :, index] for t in (query, key, value))
        gathered = _flash(q, k, v, cu_seqlens, kwargs["max_length_q"], scaling)
        out = gathered.new_empty(query.transpose(1, 2).shape)
        out[0, index[owned]] = gathered[0, owned]
        return out, None
    plan = _plan_of_forward(cu_seqlens, index, owned)
    return _bucketed_sdpa(query, key, value, plan, scaling), None


@dataclass(frozen=True)
class _Bucket:
    """Sequences of similar length attended in one SDPA call, right-padded to the longest."""

    packed: torch.Tensor  # int64 [G, W]: the packed position of each sequence's tokens
    kept: torch.Tensor  # bool [G, W]: the outputs the bucket writes (real and owned)
    to: torch.Tensor  # int64: the packed positions they are written to, packed[kept]


# Every layer of a forward gets the same bound tensors: the plan is made once per forward.
_last_plan: tuple[tuple[Any, ...], list[_Bucket]] | None = None


def _plan_of_forward(
    cu_seqlens: torch.Tensor, index: torch.Tensor | None, owned: torch.Tensor | None
) -> list[_Bucket]:
    """`_plan` of these bounds, remembered for the next layer (the same tensor objects)."""
    global _last_plan
    key = (cu_seqlens, index, owned)
    last = _last_plan
    if last is not None and all(a is b for a, b in zip(last[0], key, strict=True)):
        return last[1]
    plan = _plan(cu_seqlens.tolist(), cu_seqlens.device, index=index, owned=owned)
    _last_plan = (key, plan)
    return plan


def _plan(
    bounds: list[int],
    device: torch.device,
    waste: float = 1.25,
    index: torch.Tensor | None = None,
    owned: torch.Tensor | None = None,
) -> list[_Bucket]:
    """Buckets of sequences of similar length (at most `waste` times the attention work of
    exact varlen). A padded place repeats its sequence's last token, so it is never seen by
    a real query (causal). With `index` (shared prompts), `bounds` bound the gathered
    sequences and only `owned` outputs are written."""
    lengths = [end - start for start, end in itertools.pairwise(bounds)]
    order = sorted((i for i, n in enumerate(lengths) if n > 0), key=lambda i: -lengths[i])
    plan = []
    for bucket in _buckets(order, lengths, waste):
        starts = torch.tensor([bounds[i] for i in bucket], device=device)
        sizes = torch.tensor([lengths[i] for i in bucket], device=device)
        steps = torch.arange(lengths[bucket[0]], device=device)
        place = starts[:, None] + torch.minimum(steps[None], sizes[:, None] - 1)  # [G, W]
        packed = place if index is None else index[place]
        kept = steps[None] < sizes[:, None]
        if owned is not None:
            kept &= owned[place]
        plan.append(_Bucket(packed, kept, packed[kept]))
    return plan


def _bucketed_sdpa(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    plan: list[_Bucket],
    scaling: float | None,
) -> torch.Tensor:
    """Causal SDPA per bucket of `plan`: a few batched calls instead of one per sequence."""
    out = torch.empty_like(query)
    for bucket in plan:
        # `take`: packed positions repeat (a shared prompt in each of its rows, a padded
        # place), and their gradients must add up in a fixed order
        q, k, v = (_gather(t[0], bucket.packed).transpose(0, 1) for t in (query, key, value))
        attended = F.scaled_dot_product_attention(  # [G, H, W, D]
            q, k, v, is_causal=True, scale=scaling, enable_gqa=q.shape[1] != k.shape[1]
        )
        # (under autocast SDPA answers in its dtype, the buffer is the inputs')
        out[0][:, bucket.to] = attended.transpose(0, 1)[:, bucket.kept].to(out.dtype)
    return out.transpose(1, 2).contiguous()


def _gather(states: torch.Tensor, packed: torch.Tensor) -> torch.Tensor:
    """[H, N, D] states at the packed positions [G, W]: [H, G, W, D]."""
    return take(states, 1, packed.reshape(-1)).unflatten(1, packed.shape)


def _buckets(order: list[int], lengths: list[int], waste: float) -> list[list[int]]:
    """Consecutive runs of `order` (longest first) whose padded size stays within `waste`
    times their real size."""
    buckets: list[list[int]] = []
    total = 0
    for i in order:
        if buckets and lengths[buckets[-1][0]] * (len(buckets[-1]) + 1) <= waste * (
            total + lengths[i]
        ):
            buckets[-1].append(i)
            total += lengths[i]
        else:
            buckets.append([i])
            total = lengths[i]
    return buckets


@functools.cache
def _flash_varlen() -> Any:
    try:
        from flash_attn import flash_attn_varlen_func
    except ImportError:
        return None
    return flash_attn_varlen_func


def _flash(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    cu_seqlens: torch.Tensor,
    max_seqlen: int,
    scaling: float | None,
) -> torch.Tensor:
    cu = cu_seqlens.to(torch.int32)
    out = _flash_varlen()(
        query[0].transpose(0, 1),  # [N, H, D]
        key[0].transpose(0, 1),
        value[0].transpose(0, 1),
        cu,
        cu,
        int(max_seqlen),
        int(max_seqlen),
        softmax_scale=scaling,
        causal=True,
    )
    return out[None]  # [1, N, H, D]


def _no_mask(*args: Any, **kwargs: Any) -> None:
    return None


@functools.cache
def register() -> str:
    """Make `rl_varlen` an attention implementation transformers can select; its name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(NAME, varlen_attention)
    AttentionMaskInterface.register(NAME, _no_mask)
    return NAME
