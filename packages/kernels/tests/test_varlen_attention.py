"""`rl_varlen` attention against SDPA with a block-diagonal causal mask (float64)."""

import pytest
import torch
import torch.nn.functional as F

from rl.kernels.varlen_attention import varlen_attention


def block_causal_reference(query, key, value, cu_seqlens):
    n = query.shape[2]
    seq = torch.repeat_interleave(torch.arange(len(cu_seqlens) - 1), cu_seqlens.diff().long())
    allowed = (seq[:, None] == seq[None]) & torch.ones(n, n, dtype=torch.bool).tril()
    groups = query.shape[1] // key.shape[1]
    key, value = key.repeat_interleave(groups, 1), value.repeat_interleave(groups, 1)
    return F.scaled_dot_product_attention(query, key, value, attn_mask=allowed).transpose(1, 2)


@pytest.mark.parametrize("lengths", [[5, 1, 0, 7], [1], [3, 3, 3], [0, 9, 2]])
@pytest.mark.parametrize("kv_heads", [1, 2, 4])
def test_matches_block_diagonal_causal_sdpa(lengths, kv_heads):
    generator = torch.Generator().manual_seed(sum(lengths) + kv_heads)
    n, heads, dim = sum(lengths), 4, 8
    query = torch.randn(1, heads, n, dim, generator=generator, dtype=torch.float64)
    key = torch.randn(1, kv_heads, n, dim, generator=generator, dtype=torch.float64)
    value = torch.randn(1, kv_heads, n, dim, generator=generator, dtype=torch.float64)
    cu_seqlens = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)
    out, _ = varlen_attention(None, query, key, value, None, cu_seq_lens_q=cu_seqlens)
    assert out.shape == (1, n, heads, dim)
    torch.testing.assert_close(out, block_causal_reference(query, key, value, cu_seqlens))


def test_needs_the_sequence_bounds():
    query = torch.zeros(1, 2, 3, 4)
    with pytest.raises(ValueError, match="cu_seq_lens_q"):
        varlen_attention(None, query, query, query, None)


def shared_prompt_layout():
    """Four sequences over two prompts: (A, r1), (A, empty), (B, r3), (A, r4), with A and B
    once each in the packed row [A r1 r4 B r3] (A: 3 tokens, B: 2; r1: 2, r3: 4, r4: 1)."""
    a, r1, r4, b, r3 = [0, 1, 2], [3, 4], [5], [6, 7], [8, 9, 10, 11]
    sequences = [a + r1, a, b + r3, a + r4]
    owns = [[True] * 5, [False] * 3, [True] * 6, [False] * 3 + [True]]
    index = torch.tensor([p for s in sequences for p in s])
    owned = torch.tensor([o for row in owns for o in row])
    cu_seqlens = torch.tensor([0, *torch.tensor([len(s) for s in sequences]).cumsum(0)])
    return index, owned, cu_seqlens.to(torch.int32), 12


def shared_reference(query, key, value, index, owned, cu_seqlens, n):
    """Block-diagonal causal SDPA over the sequences gathered whole, each packed position
    taken from its owner."""
    gathered = block_causal_reference(
        query[:, :, index], key[:, :, index], value[:, :, index], cu_seqlens
    )
    out = torch.empty(1, n, query.shape[1], query.shape[3], dtype=query.dtype)
    out[0, index[owned]] = gathered[0, owned]
    return out


@pytest.mark.parametrize("kv_heads", [1, 4])
def test_shared_prompts_match_attention_over_the_whole_sequences(kv_heads):
    index, owned, cu_seqlens, n = shared_prompt_layout()
    assert torch.equal(torch.bincount(index[owned], minlength=n), torch.ones(n, dtype=torch.long))
    generator = torch.Generator().manual_seed(kv_heads)
    query = torch.randn(1, 4, n, 8, generator=generator, dtype=torch.float64)
    key = torch.randn(1, kv_heads, n, 8, generator=generator, dtype=torch.float64)
    value = torch.randn(1, kv_heads, n, 8, generator=generator, dtype=torch.float64)
    out, _ = varlen_attention(
        None,
        query,
        key,
        value,
        None,
        cu_seq_lens_q=cu_seqlens,
        rl_sequence_index=index,
        rl_owned=owned,
        max_length_q=6,
    )
    expected = shared_reference(query, key, value, index, owned, cu_seqlens, n)
    torch.testing.assert_close(out, expected)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_shared_prompts_on_cuda_without_flash_attention(monkeypatch):
    """The path a GPU box without flash-attn takes (the GPU campaign installs none):
    bucketed causal SDPA on CUDA tensors, in fp16."""
    import rl.kernels.varlen_attention as module

    monkeypatch.setattr(module, "_flash_varlen", lambda: None)
    _check_shared_prompts_on_cuda()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_shared_prompts_on_flash_attention():
    pytest.importorskip(
        "flash_attn",
        reason="flash-attn is not installed: the GPU campaign does not install it (a CUDA "
        "build against the box's own torch; `pip install flash-attn --no-build-isolation` "
        "where a wheel or nvcc and an index are available); the SDPA path is tested by "
        "test_shared_prompts_on_cuda_without_flash_attention",
    )
    _check_shared_prompts_on_cuda()


def _check_shared_prompts_on_cuda():
    index, owned, cu_seqlens, n = shared_prompt_layout()
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 4, n, 64, generator=generator) for _ in range(3))
    out, _ = varlen_attention(
        None,
        *(t.cuda().half() for t in (q, k, v)),
        None,
        cu_seq_lens_q=cu_seqlens.cuda(),
        rl_sequence_index=index.cuda(),
        rl_owned=owned.cuda(),
        max_length_q=6,
    )
    expected = shared_reference(q.double(), k.double(), v.double(), index, owned, cu_seqlens, n)
    torch.testing.assert_close(out.cpu().double(), expected, atol=2e-3, rtol=2e-3)


def test_the_layers_of_a_forward_share_one_plan_and_a_new_packing_gets_its_own(monkeypatch):
    """The layers of a forward pass the same bound tensors: the buckets are planned once.
    The next forward's new tensors (other lengths) are planned anew, not served stale."""
    import rl.kernels.varlen_attention as module

    plans, plan = [], module._plan
    monkeypatch.setattr(module, "_plan", lambda *a, **k: plans.append(1) or plan(*a, **k))
    generator = torch.Generator().manual_seed(0)
    for lengths in ([4, 2, 6], [1, 7, 3, 3]):
        n = sum(lengths)
        cu_seqlens = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()])
        for _layer in range(3):
            query, key, value = (
                torch.randn(1, 2, n, 8, generator=generator, dtype=torch.float64) for _ in range(3)
            )
            out, _ = varlen_attention(None, query, key, value, None, cu_seq_lens_q=cu_seqlens)
            torch.testing.assert_close(out, block_causal_reference(query, key, value, cu_seqlens))
    assert len(plans) == 2


def test_shared_prompt_gradients_are_bit_identical_run_to_run_with_two_threads():
    """The demo's step-3 drift (issue 34): 8 prompts of 16 rows each, packed once, their
    keys and values gathered into every row's sequence; with two torch threads the
    gradients of a prompt's keys and values summed over its rows in thread order."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        generator = torch.Generator().manual_seed(0)
        prompt, prompts, rows_per_prompt = 12, 8, 16
        index, owned, lengths, start = [], [], [], 0
        for _ in range(prompts):
            responses = torch.randint(1, 5, (rows_per_prompt,), generator=generator).tolist()
            at = start + prompt
            for row, length in enumerate(responses):
                index += [*range(start, start + prompt), *range(at, at + length)]
                owned += [row == 0] * prompt + [True] * length
                lengths.append(prompt + length)
                at += length
            start = at
        index, owned = torch.tensor(index), torch.tensor(owned)
        cu_seqlens = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()])
        query = torch.randn(1, 2, start, 64, generator=generator, requires_grad=True)
        key = torch.randn(1, 1, start, 64, generator=generator, requires_grad=True)
        value = torch.randn(1, 1, start, 64, generator=generator, requires_grad=True)
        grad = torch.randn(1, start, 2, 64, generator=generator)
        grads = []
        for _ in range(10):
            for tensor in (query, key, value):
                tensor.grad = None
            out, _ = varlen_attention(
                None,
                query,
                key,
                value,
                None,
                cu_seq_lens_q=cu_seqlens,
                rl_sequence_index=index,
                rl_owned=owned,
                max_length_q=max(lengths),
            )
            out.backward(grad)
            grads.append([t.grad.clone() for t in (query, key, value)])
    finally:
        torch.set_num_threads(threads)
    for other in grads[1:]:
        assert all(torch.equal(a, b) for a, b in zip(other, grads[0], strict=True))
