"""fused_logprob_entropy on a real GPU (fused Triton kernels; CUDA epilogues with cuBLAS GEMMs): `nox -s gpu_tests`."""

import math

import pytest
import torch

from rl.kernels import fused_logprob_entropy

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.mark.parametrize("impl", ["triton", "cuda", "reference"])
@pytest.mark.parametrize(("tokens", "hidden_size", "vocab"), [(1, 64, 1000), (777, 512, 32003)])
def test_bf16_matches_float64_reference(monkeypatch, impl, tokens, hidden_size, vocab):
    monkeypatch.setenv("RL_KERNELS_IMPL", impl)
    g = torch.Generator(device="cuda").manual_seed(0)
    hidden = torch.randn(tokens, hidden_size, device="cuda", generator=g).bfloat16()
    weight = (
        torch.randn(vocab, hidden_size, device="cuda", generator=g) / math.sqrt(hidden_size)
    ).bfloat16()
    labels = torch.randint(vocab, (tokens,), device="cuda", generator=g)
    h, w = hidden.clone().requires_grad_(True), weight.clone().requires_grad_(True)
    lp, ent = fused_logprob_entropy(h, w, labels, 0.7, token_chunk=256, vocab_chunk=4096)
    (lp.sum() + ent.sum()).backward()
    h64, w64 = hidden.double().requires_grad_(True), weight.double().requires_grad_(True)
    logp = torch.log_softmax(h64 @ w64.t() / 0.7, -1)
    want_lp = logp.gather(1, labels[:, None])[:, 0]
    want_ent = -(logp.exp() * logp).sum(-1)
    gh, gw = torch.autograd.grad(want_lp.sum() + want_ent.sum(), (h64, w64))
    assert (lp.double() - want_lp).abs().max() < 1e-3
    assert (ent.double() - want_ent).abs().max() < 1e-3
    assert (h.grad.double() - gh).abs().max() < 5e-2 * (gh.abs().max() + 1)
    assert (w.grad.double() - gw).abs().max() < 5e-2 * (gw.abs().max() + 1)
    assert (lp <= 0).all() and (ent >= 0).all() and (ent <= math.log(vocab)).all()


def test_peak_memory_is_far_below_naive():
    tokens, hidden_size, vocab = 4096, 1024, 65536
    hidden = torch.randn(
        tokens, hidden_size, device="cuda", dtype=torch.bfloat16, requires_grad=True
    )
    weight = torch.randn(
        vocab, hidden_size, device="cuda", dtype=torch.bfloat16, requires_grad=True
    )
    labels = torch.randint(vocab, (tokens,), device="cuda")

    def peak(fn):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        lp, ent = fn()
        (lp.sum() + ent.sum()).backward()
        torch.cuda.synchronize()
        hidden.grad = weight.grad = None
        return torch.cuda.max_memory_allocated() - base

    def naive():
        logp = torch.log_softmax((hidden @ weight.t()).float(), -1)
        return logp.gather(1, labels[:, None])[:, 0], -(logp.exp() * logp).sum(-1)

    fused = peak(
        lambda: fused_logprob_entropy(hidden, weight, labels, token_chunk=1024, vocab_chunk=8192)
    )
    assert fused * 8 <= peak(naive)
