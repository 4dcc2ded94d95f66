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
