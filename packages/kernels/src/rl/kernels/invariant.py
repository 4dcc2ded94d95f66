"""Batch-invariant forward ops: a token's numbers do not depend on the rows beside it.

A rollout engine decodes one token per sequence against a KV cache, in a batch of
whatever sequences are running; a trainer runs whole sequences, packed or padded, in
micro-batches of other sequences. The same token then goes through GEMMs of other
shapes and reductions over other lengths, and its log-prob comes out a few ulps apart.
With the ops here both sides compute every number of a token the same way, bit for bit,
so the rollout's log-probs are the trainer's (true on-policy RL, `rollout.batch_invariant`):

- **GEMMs of at least `MIN_ROWS` rows.** The CPU BLAS (MKL here) picks its reduction
  order over the inner dimension from the inner dimension and its tiling alone once a
  product has a few rows, in either operand order (x @ W^T or W @ x^T, which the HF
  engine's narrow decode linears use); with fewer rows (1 to 3 for x @ W^T, up to 8 for
  W @ x^T on a 2-core AMD EPYC) it takes a GEMV-like path with another order. `pad_rows` gives a product its missing rows as zeros (a decode step of
  few sequences; the last rows of a tiled LM head). `verify_rows` checks this on the
  machine at hand, and `rollout.batch_invariant` refuses to start where it fails.
- **`rl_invariant` attention.** Each sequence's keys are laid out by position, and a
  query at position p attends over the first ceil((p + 1) / `BLOCK`) blocks of them (the
  later keys masked, exact zeros after the softmax): the score GEMM, the softmax and
  the probabilities-times-values GEMM reduce over a length set by p alone, whether the
  query is one decode step against a cache, a row of a padded batch or a packed
  sequence. The queries of one block go into one product (at least `MIN_ROWS` rows), a
  key head's query heads together. Its backward keeps the inputs, the output and the
  rows' logsumexp and recomputes the probabilities, as flash attention does. The cost
  is up to a block of masked keys a query, and materialised block scores.
- **SiLU as x / (1 + exp(-x)).** torch's CPU `silu` runs the tail of a tensor (and of
  each thread's share) through a scalar formula that rounds apart from the vector one in
  ~4 % of elements, so a token's activation depended on where it sat in the tensor;
  `exp`, `+` and `/` round the same on both paths.

Built and verified on CPU; on CUDA the same code runs, but cuBLAS's choices are not
verified (`rollout.batch_invariant` asks for `trainer.device: cpu`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from rl.kernels.gather import take

NAME = "rl_invariant"
MIN_ROWS = 16
BLOCK = 64  # key positions: a query at position p reduces over the first ceil((p + 1) / 64) blocks


def pad_rows(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """`x` [..., K] as [max(rows, MIN_ROWS), K] (zero rows added) and its row count."""
    flat = x.reshape(-1, x.shape[-1])
    rows = flat.shape[0]
    if rows >= MIN_ROWS:
        return flat, rows
    return torch.cat([flat, flat.new_zeros(MIN_ROWS - rows, flat.shape[1])]), rows


def over_min_rows(forward: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """`forward(x)` (a row-wise map of [rows, K] such as a linear layer) over at least
    `MIN_ROWS` rows: the added zero rows are dropped after, the shape kept."""
    flat, rows = pad_rows(x)
    out = forward(flat)
    return out[:rows].reshape(*x.shape[:-1], out.shape[-1])


def invariant_silu(x: torch.Tensor) -> torch.Tensor:
    """silu(x) = x * sigmoid(x), computed the same way at every place of a tensor
    (differentiable: the gradient is torch's `silu_backward`, saving `x` alone)."""
    if torch.is_grad_enabled() and x.requires_grad:
        return _SiLU.apply(x)
    return _silu(x)


def _silu(x: torch.Tensor) -> torch.Tensor:
    denominator = x.neg()  # (in place after this: no [tokens, intermediate] temporaries)
    return x / denominator.exp_().add_(1)


class _SiLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # type: ignore[override]
        ctx.save_for_backward(x)
        return _silu(x)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        (x,) = ctx.saved_tensors
        return torch.ops.aten.silu_backward(grad, x)


@functools.cache  # (the trainer and a colocated rollout engine check the same shapes)
def verify_rows(inner: int, outer: int, dtype: torch.dtype = torch.float32, rows: int = 64) -> None:
    """Raise if this machine's GEMM gives a row other bits in a product of another height
    (`MIN_ROWS` up to `rows`), or in the other operand order, at a weight [outer, inner]."""
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(outer, inner, generator=generator).to(dtype)
    x = torch.randn(rows, inner, generator=generator).to(dtype)
    with torch.no_grad():
        whole = F.linear(x, weight)
        for height in (MIN_ROWS, MIN_ROWS + 1, rows // 2):
            turned = (weight @ x[:height].t()).t()
            for form, part in (
                ("x @ weight^T", F.linear(x[:height], weight)),
                ("weight @ x^T", turned),
            ):
                if not torch.equal(part, whole[:height]):
                    raise RuntimeError(
                        f"this machine's GEMM is not row-invariant at a [{outer}, {inner}] "
                        f"weight: a row of a {height}-row product ({form}) differs from the "
                        f"same row of a {rows}-row one, so rollout.batch_invariant cannot "
                        "hold here; set it to false"
                    )


class _BlockAttention(torch.autograd.Function):
    """Causal attention of queries over all `W` position-aligned keys, keeping for backward
    only its inputs, output and the rows' logsumexp (the probabilities are recomputed, as
    flash attention does): [G, Hq, W] probabilities a layer would otherwise hold.

    A key head's query heads are one product ([groups x M] rows against its W keys), so
    grouped-query attention expands no keys. With fewer than `MIN_ROWS` rows the
    product gets zero rows added."""

    @staticmethod
    def forward(ctx, query, key, value, last, scaling):  # type: ignore[override]
        probs, lse, rows = _probabilities(query, key, last, scaling, any(ctx.needs_input_grad[:3]))
        out = torch.matmul(probs, value)[:, :, :rows]
        ctx.save_for_backward(query, key, value, last, out, lse)
        ctx.scaling = scaling
        return out

    @staticmethod
    def backward(ctx, grad_out):  # type: ignore[override]
        query, key, value, last, out, lse = ctx.saved_tensors
        scores, _ = _scores(query, key, last, ctx.scaling)
        probs = torch.exp(scores - lse[..., None])[:, :, : out.shape[2]]
        grad_value = torch.matmul(probs.transpose(-1, -2), grad_out)
        grad_probs = torch.matmul(grad_out, value.transpose(-1, -2))
        grad_scores = probs * (grad_probs - (grad_out * out).sum(-1, keepdim=True)) * ctx.scaling
        grad_query = torch.matmul(grad_scores, key)
        grad_key = torch.matmul(grad_scores.transpose(-1, -2), query)
        return grad_query, grad_key, grad_value, None, None


def _scores(
    query: torch.Tensor, key: torch.Tensor, last: torch.Tensor, scaling: float
) -> tuple[torch.Tensor, int]:
    """Scaled scores [G, Hkv, rows', W] of the grouped queries [G, Hkv, rows, D] (-inf
    beyond each query's last key), and the real row count (rows' adds zero rows up to
    `MIN_ROWS`: the one place attention's products get their minimum)."""
    rows = query.shape[2]
    if rows < MIN_ROWS:
        pad = query.new_zeros(*query.shape[:2], MIN_ROWS - rows, query.shape[3])
        query = torch.cat([query, pad], 2)
        last = torch.cat([last, last.new_zeros(last.shape[0], MIN_ROWS - rows)], 1)
    scores = torch.matmul(query, key.transpose(-1, -2)) * scaling
    places = torch.arange(key.shape[2], device=key.device)
    hidden = places[None, None, :] > last[:, :, None]  # [G, rows', W]
    return scores.masked_fill(hidden[:, None], float("-inf")), rows


def _probabilities(
    query: torch.Tensor, key: torch.Tensor, last: torch.Tensor, scaling: float, lse: bool
) -> tuple[torch.Tensor, torch.Tensor | None, int]:
    scores, rows = _scores(query, key, last, scaling)
    return torch.softmax(scores, -1), torch.logsumexp(scores, -1) if lse else None, rows


def _attend(
    query: torch.Tensor,  # [G, Hq, M, D]
    key: torch.Tensor,  # [G, Hkv, W, D], by position
    value: torch.Tensor,
    last: torch.Tensor,  # int64 [G, M]: the last key position each query sees
    scaling: float,
) -> torch.Tensor:
    """Causal attention of queries over all `W` position-aligned keys; [G, Hq, M, D]."""
    g, heads, m, d = query.shape
    kv_heads = key.shape[1]
    groups = heads // kv_heads
    # query head h reads key head h // groups: each key head's queries as one product
    grouped = query.reshape(g, kv_heads, groups * m, d)
    out = _BlockAttention.apply(grouped, key, value, last.repeat(1, groups), scaling)
    return out.reshape(g, heads, m, d)


def _by_blocks(
    query: torch.Tensor,  # [G, Hq, M, D]
    key: torch.Tensor,  # [G, Hkv, W, D], by position (W a multiple of BLOCK)
    value: torch.Tensor,
    position: torch.Tensor,  # int64 [G, M]: each query's position
    scaling: float,
) -> torch.Tensor:
    """Each query attends over the keys of the first `BLOCK`s up to its own position's
    block: the reductions over keys have a length set by the query's position alone. The
    queries of a block are gathered from every row into one product; [G, Hq, M, D]."""
    queries = query.transpose(1, 2)  # [G, M, Hq, D]
    out = torch.zeros_like(queries)
    block = torch.div(position, BLOCK, rounding_mode="floor")
    for b in torch.unique(block).tolist():
        chosen = block == b
        rows = torch.nonzero(chosen.any(1)).squeeze(1)
        picked = chosen[rows]  # [R, M]
        rank = picked.long().cumsum(1) - 1  # each picked query's place among its row's
        count = int(picked.sum(1).max())  # (`_scores` pads the grouped product)
        row_of, query_of = torch.nonzero(picked, as_tuple=True)
        place = rank[row_of, query_of]
        gathered = queries.new_zeros(len(rows), count, *queries.shape[2:])
        gathered = gathered.index_put((row_of, place), queries[rows[row_of], query_of])
        last = position.new_zeros(len(rows), count).index_put(
            (row_of, place), position[rows[row_of], query_of]
        )
        width = (b + 1) * BLOCK
        attended = _attend(
            gathered.transpose(1, 2), key[rows, :, :width], value[rows, :, :width], last, scaling
        ).transpose(1, 2)
        out = out.index_put((rows[row_of], query_of), attended[row_of, place])
    return out.transpose(1, 2)


def _width(longest: int) -> int:
    """Key positions to lay out: `longest` rounded up to whole blocks."""
    return max(1, -(-longest // BLOCK)) * BLOCK


def _aligned(states: torch.Tensor, index: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """[H, N, D] states at the positions `index` [G, W] -> [G, H, W, D], zeros where not `real`."""
    gathered = take(states, 1, index.reshape(-1)).unflatten(1, index.shape)  # [H, G, W, D]
    return (gathered * real[None, :, :, None]).transpose(0, 1)


def _packed(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    bounds: torch.Tensor,
    scaling: float,
    index: torch.Tensor | None = None,
    owned: torch.Tensor | None = None,
) -> torch.Tensor:
    """One packed row [1, H, N, D] of sequences bounded by `bounds`: [1, N, Hq, D]. With
    shared prompts, `bounds` bound the gathered sequences, `index` holds their tokens'
    packed positions and each packed position takes its owner's (`owned`) output."""
    starts, lengths = bounds[:-1].long(), bounds.diff().long()
    width = _width(int(lengths.max()))
    places = torch.arange(width, device=bounds.device)
    real = places[None] < lengths[:, None]  # [G, W]
    gathered = torch.where(real, starts[:, None] + places[None], 0)
    positions = gathered if index is None else index[gathered]
    q, k, v = (_aligned(t[0], positions, real) for t in (query, key, value))
    out = _whole_sequences(q, k, v, lengths, scaling)  # [G, Hq, W, D]
    flat = out.transpose(1, 2)[real]  # [gathered tokens, Hq, D], in gathered order
    if index is None:
        return flat[None]
    assert owned is not None
    result = flat.new_zeros(query.shape[2], *flat.shape[1:])
    return result.index_copy(0, index[owned], flat[owned])[None]


def _whole_sequences(
    query: torch.Tensor,  # [G, Hq, W, D]: every position of each sequence, by position
    key: torch.Tensor,  # [G, Hkv, W, D]
    value: torch.Tensor,
    lengths: torch.Tensor,  # [G]
    scaling: float,
) -> torch.Tensor:
    """`_by_blocks` where the queries are whole sequences: a block's queries are a slice of
    positions (of the sequences that reach it), with no gathering; [G, Hq, W, D]."""
    outs = []
    offsets = torch.arange(BLOCK, device=key.device)
    for start in range(0, key.shape[2], BLOCK):
        width = start + BLOCK
        rows = torch.nonzero(lengths > start).squeeze(1)
        whole = len(rows) == len(lengths)
        q, k, v = (
            t[:, :, start:width] if t is query else t[:, :, :width] for t in (query, key, value)
        )
        if not whole:
            q, k, v = (t.index_select(0, rows) for t in (q, k, v))
        last = (start + offsets).expand(len(rows), BLOCK)
        attended = _attend(q, k, v, last, scaling)
        if not whole:
            attended = attended.new_zeros(len(lengths), *attended.shape[1:]).index_copy(
                0, rows, attended
            )
        outs.append(attended)
    return torch.cat(outs, 2)


def _masked(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor,
    scaling: float,
) -> torch.Tensor:
    """Padded rows or decode steps: queries [B, Hq, Lq, D] are the last Lq of the keys
    [B, Hkv, Lk, D]; `mask` [B, 1, Lq, Lk] (True: attends) says which keys are real."""
    rows, keys = query.shape[0], key.shape[2]
    real_key = mask[:, 0].any(1)  # [B, Lk]: a key some query sees
    position = real_key.long().cumsum(-1) - 1
    width = _width(int(position[:, -1].max()) + 1)
    # the key index at each position (unreal keys spill into a column that is dropped)
    slot = torch.where(real_key, position, width)
    spill = torch.zeros(rows, width + 1, dtype=torch.long, device=key.device)
    spill.scatter_(1, slot, torch.arange(keys, device=key.device).expand(rows, keys))
    real = torch.arange(width, device=key.device)[None] <= position[:, -1:]
    flat = (spill[:, :width] + torch.arange(rows, device=key.device)[:, None] * keys).reshape(-1)
    k, v = (
        _aligned(
            t.transpose(0, 1).reshape(t.shape[1], -1, t.shape[3]), flat.view(rows, width), real
        )
        for t in (key, value)
    )
    queries = position[:, keys - query.shape[2] :].clamp(min=0)  # [B, Lq]
    return _by_blocks(query, k, v, queries, scaling).transpose(1, 2)


def invariant_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention-function form: [B, H, L, D] in, [B, L, H, D] out."""
    if dropout:
        raise ValueError("rl_invariant attention runs without dropout (attention_dropout = 0)")
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    bounds = kwargs.get("cu_seq_lens_q")
    if bounds is not None:
        index, owned = kwargs.get("rl_sequence_index"), kwargs.get("rl_owned")
        return _packed(query, key, value, bounds, scale, index, owned), None
    if attention_mask is None or attention_mask.dtype != torch.bool:
        raise ValueError("rl_invariant attention needs a boolean [B, 1, Lq, Lk] mask")
    return _masked(query, key, value, attention_mask, scale), None


def _full_mask(**kwargs: Any) -> torch.Tensor | None:
    """transformers' SDPA mask, always materialised (never skipped as plain causal)."""
    from transformers.masking_utils import sdpa_mask

    kwargs["allow_is_causal_skip"] = False
    return sdpa_mask(**kwargs)


@functools.cache
def register() -> str:
    """Make `rl_invariant` attention selectable with `model.set_attn_implementation`; its
    name (transformers is imported only then: rl-kernels does not depend on it)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(NAME, invariant_attention)
    AttentionMaskInterface.register(NAME, _full_mask)
    return NAME
