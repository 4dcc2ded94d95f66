"""Batch-invariant ops (`rl.kernels.invariant`): a token's numbers are the same bits whether
its sequence is packed with others, padded in a batch or decoded one token at a time
against a cache, and they are the attention / SiLU / log-probs they stand for."""

import itertools

import torch
import torch.nn.functional as F

from rl.kernels import fused_logprob_entropy, logprob_of_logits
from rl.kernels.invariant import (
    MIN_ROWS,
    invariant_attention,
    invariant_silu,
    pad_rows,
    verify_rows,
)

HEADS, KV_HEADS, DIM = 4, 2, 16


def sequences(lengths, seed=0):
    """Per sequence its (query, key, value), each [heads, length, DIM], float32."""
    generator = torch.Generator().manual_seed(seed)
    return [
        tuple(torch.randn(h, n, DIM, generator=generator) for h in (HEADS, KV_HEADS, KV_HEADS))
        for n in lengths
    ]


def packed(seqs):
    """One packed row: [1, H, N, D] each, and the bounds."""
    q, k, v = (torch.cat([s[i] for s in seqs], 1)[None] for i in range(3))
    bounds = torch.tensor([0, *torch.tensor([s[0].shape[1] for s in seqs]).cumsum(0).tolist()])
    out, _ = invariant_attention(None, q, k, v, None, cu_seq_lens_q=bounds)
    return [out[0, a:b] for a, b in itertools.pairwise(bounds.tolist())]


def padded(seqs, left):
    """A batch of rows padded on the left by `left[i]` and on the right to the longest."""
    width = max(s[0].shape[1] + pad for s, pad in zip(seqs, left, strict=True))
    rows = []
    real = torch.zeros(len(seqs), width, dtype=torch.bool)
    for i, (s, pad) in enumerate(zip(seqs, left, strict=True)):
        n = s[0].shape[1]
        rows.append([F.pad(t, (0, 0, pad, width - pad - n), value=7.0) for t in s])
        real[i, pad : pad + n] = True
    q, k, v = (torch.stack([r[i] for r in rows]) for i in range(3))
    causal = torch.ones(width, width, dtype=torch.bool).tril()
    mask = (causal[None] & real[:, None, :])[:, None]  # [B, 1, L, L]
    out, _ = invariant_attention(None, q, k, v, mask)
    return [
        out[i, pad : pad + s[0].shape[1]] for i, (s, pad) in enumerate(zip(seqs, left, strict=True))
    ]


def decoded(seqs, prompt):
    """The first `prompt` tokens at once, then one query a step against the growing cache,
    the rows left-padded to a common prompt width."""
    lengths = [s[0].shape[1] for s in seqs]
    pad = [prompt - min(prompt, n) for n in lengths]
    outs = [[] for _ in seqs]
    for step in range(prompt, max(lengths) + 1):
        width = step
        keys = torch.zeros(len(seqs), KV_HEADS, width, DIM)
        values = torch.zeros_like(keys)
        queries = torch.zeros(len(seqs), HEADS, 1 if step > prompt else prompt, DIM)
        real = torch.zeros(len(seqs), width, dtype=torch.bool)
        for i, (q, k, v) in enumerate(seqs):
            seen = min(step, lengths[i])
            keys[i, :, pad[i] : pad[i] + seen] = k[:, :seen]
            values[i, :, pad[i] : pad[i] + seen] = v[:, :seen]
            real[i, pad[i] : pad[i] + seen] = True
            if step == prompt:
                queries[i, :, pad[i] :] = q[:, : prompt - pad[i]]
            else:
                queries[i, :, 0] = q[:, min(step, lengths[i]) - 1]
        lq = queries.shape[2]
        causal = torch.ones(lq, width, dtype=torch.bool).tril(width - lq)
        mask = (causal[None] & real[:, None, :])[:, None]
        out, _ = invariant_attention(None, queries, keys, values, mask)
        for i, n in enumerate(lengths):
            if step == prompt:
                outs[i].append(out[i, pad[i] :, :][: min(prompt, n)])
            elif step <= n:
                outs[i].append(out[i, :1])
    return [torch.cat(o) for o in outs]


def reference(seq):
    q, k, v = (t.double()[None] for t in seq)
    groups = HEADS // KV_HEADS
    k, v = k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)[0].transpose(0, 1)


def test_a_sequence_attends_to_the_same_bits_packed_padded_or_decoded():
    lengths = [9, 3, 70, 12, 1, 130]  # (blocks of 64 key positions: one, two and three)
    seqs = sequences(lengths)
    alone = [packed([s])[0] for s in seqs]
    layouts = {
        "packed": packed(seqs),
        "packed, other order": packed(seqs[::-1])[::-1],
        "padded on the left": padded(seqs, [130 - n for n in lengths]),
        "padded both sides": padded(seqs, [2, 0, 5, 1, 3, 0]),
        "decoded": decoded(seqs, 4),
    }
    for name, outs in layouts.items():
        for i, (out, want) in enumerate(zip(outs, alone, strict=True)):
            assert torch.equal(out, want), f"{name}: sequence {i}"
    for seq, out in zip(seqs, alone, strict=True):
        torch.testing.assert_close(out.double(), reference(seq), atol=2e-6, rtol=2e-6)


def test_silu_is_the_same_at_every_place_of_a_tensor():
    x = torch.randn(70000, generator=torch.Generator().manual_seed(1)) * 4
    whole = invariant_silu(x)
    pieces = torch.cat([invariant_silu(x[i : i + 7]) for i in range(0, 7000, 7)])
    assert torch.equal(whole[:7000], pieces)  # the tails and the vector body agree
    torch.testing.assert_close(whole.double(), F.silu(x.double()), atol=1e-6, rtol=1e-6)


def test_few_rows_are_padded_to_the_minimum_and_many_are_left_alone():
    few = torch.randn(2, 3, 5)
    out, rows = pad_rows(few)
    assert rows == 6 and out.shape == (MIN_ROWS, 5)
    assert torch.equal(out[:6], few.reshape(6, 5)) and not out[6:].any()
    many = torch.randn(MIN_ROWS + 1, 5)
    assert pad_rows(many)[0].data_ptr() == many.data_ptr()


def test_this_machines_gemm_is_row_invariant_at_the_minimum():
    verify_rows(96, 200)  # raises otherwise: rollout.batch_invariant refuses to start


def test_a_tokens_fused_logprob_does_not_depend_on_the_rows_in_its_chunk():
    generator = torch.Generator().manual_seed(3)
    hidden = torch.randn(37, 32, generator=generator)
    weight = torch.randn(300, 32, generator=generator)
    labels = torch.randint(0, 300, (37,), generator=generator)
    # 37 rows in chunks of 16: the last chunk has 5 rows, padded to MIN_ROWS
    chunked, _ = fused_logprob_entropy(hidden, weight, labels, token_chunk=16, entropy=False)
    for start in (0, 32, 36):
        alone, _ = fused_logprob_entropy(
            hidden[start : start + 1], weight, labels[start : start + 1], entropy=False
        )
        assert torch.equal(alone, chunked[start : start + 1])


def test_the_logprob_of_logits_is_the_fused_ops_bit_for_bit():
    generator = torch.Generator().manual_seed(4)
    hidden = torch.randn(20, 32, generator=generator)
    weight = torch.randn(9000, 32, generator=generator)  # three vocabulary chunks
    labels = torch.randint(0, 9000, (20,), generator=generator)
    fused, _ = fused_logprob_entropy(hidden, weight, labels, 0.7, entropy=False)
    got = logprob_of_logits(hidden @ weight.t(), labels, 0.7)
    assert torch.equal(got, fused)
    want = torch.log_softmax(hidden.double() @ weight.double().t() / 0.7, -1)
    torch.testing.assert_close(
        got.double(), want.gather(1, labels[:, None])[:, 0], rtol=1e-5, atol=1e-4
    )


def test_the_gradients_are_attentions():
    lengths = [9, 70, 1]
    seqs = [tuple(t.double().requires_grad_() for t in s) for s in sequences(lengths, seed=5)]
    outs = packed(seqs)
    weights = [torch.randn(o.shape, dtype=torch.float64) for o in outs]
    sum((o * w).sum() for o, w in zip(outs, weights, strict=True)).backward()
    for seq, weight in zip(seqs, weights, strict=True):
        ours = [t.grad.clone() for t in seq]
        for t in seq:
            t.grad = None
        (reference(seq) * weight).sum().backward()
        for got, want in zip(ours, (t.grad for t in seq), strict=True):
            torch.testing.assert_close(got, want)


def test_shared_prompts_attend_as_whole_sequences():
    """A prompt packed once for two responses (rl-fsdp's prefix grouping): each packed
    position gets its owner's output, the bits of its sequence attended alone."""
    prompt, first, second = sequences([70, 9, 5], seed=6)
    whole = [
        tuple(torch.cat([p, r], 1) for p, r in zip(prompt, resp, strict=True))
        for resp in (first, second)
    ]
    alone = [packed([s])[0] for s in whole]
    row = [torch.cat([prompt[i], first[i], second[i]], 1)[None] for i in range(3)]
    index = torch.cat([torch.arange(79), torch.arange(70), torch.arange(79, 84)])
    owned = torch.cat(
        [
            torch.ones(79, dtype=torch.bool),
            torch.zeros(70, dtype=torch.bool),
            torch.ones(5, dtype=torch.bool),
        ]
    )
    bounds = torch.tensor([0, 79, 154])
    out, _ = invariant_attention(
        None, *row, None, cu_seq_lens_q=bounds, rl_sequence_index=index, rl_owned=owned
    )
    assert torch.equal(out[0, :79], alone[0])
    assert torch.equal(out[0, 79:], alone[1][70:])
