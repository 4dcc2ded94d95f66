"""fused_logprob_entropy against a float64 full-logits reference, on CPU.

The reference materialises the logits in float64 from the same (possibly
16-bit) inputs and differentiates with autograd; it shares no code with the op.
The fused Triton kernels have their own file (test_logprob_triton.py), as has
the vocab-parallel mode (test_logprob_tp.py).
"""

import math

import pytest
import torch

from rl.kernels import fused_logprob_entropy
from rl.kernels.ops import logprob as logprob_op
from rl.kernels.ops.logprob import logprob_grads, logprob_stats

TOLERANCE = {torch.float32: 2e-5, torch.bfloat16: 2e-2, torch.float16: 5e-3}


def reference(hidden, weight, labels, temperature, g_lp, g_h):
    h = hidden.detach().double().requires_grad_(True)
    w = weight.detach().double().requires_grad_(True)
    logp = torch.log_softmax(h @ w.t() / temperature, dim=-1)
    lp = logp.gather(1, labels[:, None])[:, 0]
    ent = -(logp.exp() * logp).sum(-1)
    grad_h, grad_w = torch.autograd.grad((lp * g_lp).sum() + (ent * g_h).sum(), (h, w))
    return lp, ent, grad_h, grad_w


def make(tokens, hidden_size, vocab, dtype, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    hidden = (torch.randn(tokens, hidden_size, generator=g) * scale).to(dtype)
    weight = (torch.randn(vocab, hidden_size, generator=g) / math.sqrt(hidden_size)).to(dtype)
    labels = torch.randint(vocab, (tokens,), generator=g)
    g_lp, g_h = torch.randn(tokens, generator=g), torch.randn(tokens, generator=g)
    return hidden, weight, labels, g_lp, g_h


def run_op(hidden, weight, labels, temperature, g_lp, g_h, **chunks):
    h = hidden.clone().requires_grad_(True)
    w = weight.clone().requires_grad_(True)
    lp, ent = fused_logprob_entropy(h, w, labels, temperature, **chunks)
    ((lp * g_lp).sum() + (ent * g_h).sum()).backward()
    return lp, ent, h.grad, w.grad


def assert_close(actual, expected, tol, what):
    scale = expected.abs().max().item() + 1.0
    error = (actual.double() - expected).abs().max().item()
    assert error <= tol * scale, f"{what}: max error {error:.3g} > {tol * scale:.3g}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize(("tokens", "hidden_size", "vocab"), [(1, 8, 5), (7, 8, 37), (33, 16, 100)])
@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_matches_float64_reference(cpu_impl, dtype, tokens, hidden_size, vocab, temperature):
    hidden, weight, labels, g_lp, g_h = make(tokens, hidden_size, vocab, dtype)
    got = run_op(hidden, weight, labels, temperature, g_lp, g_h, token_chunk=4, vocab_chunk=16)
    want = reference(hidden, weight, labels, temperature, g_lp, g_h)
    for name, a, e in zip(
        ("logprob", "entropy", "grad_hidden", "grad_weight"), got, want, strict=True
    ):
        assert a.dtype == (torch.float32 if name in ("logprob", "entropy") else dtype)
        assert_close(a, e, TOLERANCE[dtype], name)


def test_chunking_does_not_change_the_result(cpu_impl):
    hidden, weight, labels, g_lp, g_h = make(19, 8, 53, torch.float32, seed=3)
    whole = run_op(hidden, weight, labels, 1.0, g_lp, g_h, token_chunk=1000, vocab_chunk=1000)
    tiled = run_op(hidden, weight, labels, 1.0, g_lp, g_h, token_chunk=5, vocab_chunk=7)
    for a, b in zip(whole, tiled, strict=True):
        assert torch.allclose(a, b, atol=1e-5)


def test_extreme_bf16_logits_stay_finite_and_bounded(cpu_impl):
    hidden, weight, labels, g_lp, g_h = make(16, 8, 300, torch.bfloat16, seed=5, scale=200.0)
    lp, ent, grad_h, grad_w = run_op(hidden, weight, labels, 1.0, g_lp, g_h, vocab_chunk=64)
    want_lp, want_ent, _, _ = reference(hidden, weight, labels, 1.0, g_lp, g_h)
    assert torch.isfinite(lp).all() and torch.isfinite(ent).all()
    assert torch.isfinite(grad_h.float()).all() and torch.isfinite(grad_w.float()).all()
    assert (lp <= 0).all() and (ent >= 0).all() and (ent <= math.log(300)).all()
    assert_close(lp, want_lp, 1e-4, "logprob")  # fp32 accumulation of bf16 inputs
    assert_close(ent, want_ent, 1e-3, "entropy")


def test_bounds_hold_for_many_random_cases(cpu_impl):
    for seed in range(20):
        hidden, weight, labels, _, _ = make(9, 8, 23, torch.float32, seed=seed, scale=seed + 0.1)
        lp, ent = fused_logprob_entropy(hidden, weight, labels, 0.5 + seed / 10, vocab_chunk=8)
        assert (lp <= 0).all() and (ent >= 0).all() and (ent <= math.log(23) + 1e-6).all()


def test_entropy_false_returns_none_and_logprob_gradient_only(cpu_impl):
    hidden, weight, labels, g_lp, _ = make(5, 8, 11, torch.float32)
    h = hidden.clone().requires_grad_(True)
    lp, ent = fused_logprob_entropy(h, weight, labels, entropy=False)
    assert ent is None
    (lp * g_lp).sum().backward()
    _, _, want_h, _ = reference(hidden, weight, labels, 1.0, g_lp, torch.zeros(5))
    assert_close(h.grad, want_h, 2e-5, "grad_hidden")


def test_opcheck_both_ops():
    hidden, weight, labels, g_lp, g_h = make(6, 8, 13, torch.float32)
    torch.library.opcheck(
        torch.ops.rl_kernels.logprob_stats.default, (hidden, weight, labels, 1.0, 0, 4, 5)
    )
    stats = logprob_stats(hidden, weight, labels, 1.0, 0, 4, 5)
    lse = stats[0] + stats[1].log()
    mean_x = stats[2] / stats[1]
    torch.library.opcheck(
        torch.ops.rl_kernels.logprob_grads.default,
        (hidden, weight, labels, 1.0, 0, 4, 5, lse, mean_x, g_lp, g_h),
    )
    assert logprob_grads(hidden, weight, labels, 1.0, 0, 4, 5, lse, mean_x, g_lp, g_h)[0].shape == (
        6,
        8,
    )


def test_bad_input_is_rejected():
    hidden, weight, labels, _, _ = make(4, 8, 9, torch.float32)
    with pytest.raises(ValueError, match=r"expected hidden \[T, H\] and weight \[V, H\]"):
        fused_logprob_entropy(hidden, weight[:, :4], labels)
    with pytest.raises(ValueError, match=r"labels must be \[T\] = \[4\]"):
        fused_logprob_entropy(hidden, weight, labels[:3])
    with pytest.raises(TypeError, match="labels must be int64"):
        fused_logprob_entropy(hidden, weight, labels.int())
    with pytest.raises(ValueError, match="temperature must be > 0"):
        fused_logprob_entropy(hidden, weight, labels, 0.0)


def test_torch_compile_traces_forward_and_backward():
    hidden, weight, labels, g_lp, g_h = make(7, 8, 37, torch.float32, seed=6)

    def objective(h, w):
        lp, ent = fused_logprob_entropy(h, w, labels, 0.8, vocab_chunk=16)
        return (lp * g_lp).sum() + (ent * g_h).sum(), lp.detach(), ent.detach()

    # aot_eager traces the forward and, through AOTAutograd, the backward graph too
    compiled = torch.compile(objective, backend="aot_eager", fullgraph=True)
    h, w = hidden.clone().requires_grad_(True), weight.clone().requires_grad_(True)
    loss, lp, ent = compiled(h, w)
    loss.backward()
    got = (lp, ent, h.grad, w.grad)
    want = reference(hidden, weight, labels, 0.8, g_lp, g_h)
    for name, a, e in zip(("logprob", "entropy", "grad_h", "grad_w"), got, want, strict=True):
        assert_close(a, e, 2e-5, name)


def test_gpu_prefers_triton_and_cpu_the_cpp_epilogue(monkeypatch):
    monkeypatch.delenv("RL_KERNELS_IMPL", raising=False)
    monkeypatch.setattr(logprob_op, "available_impls", lambda _: {"reference", "cuda", "triton"})
    assert logprob_op.chosen_impl("cuda") == "triton"
    monkeypatch.setattr(logprob_op, "available_impls", lambda _: {"reference", "cpp"})
    assert logprob_op.chosen_impl("cpu") == "cpp"
    monkeypatch.setenv("RL_KERNELS_IMPL", "cuda")
    with pytest.raises(RuntimeError, match="RL_KERNELS_IMPL=cuda but logprob has no usable cuda"):
        logprob_op.chosen_impl("cpu")


def test_no_tokens_give_zero_gradients():
    """No rows: the weight's gradient is zeros (its slices are written where they end up,
    so none may be left unwritten)."""
    weight = torch.randn(40, 8, requires_grad=True)
    hidden = torch.randn(0, 8, requires_grad=True)
    logprob, entropy = fused_logprob_entropy(
        hidden, weight, torch.zeros(0, dtype=torch.long), vocab_chunk=16
    )
    (logprob.sum() + entropy.sum()).backward()
    assert torch.equal(weight.grad, torch.zeros_like(weight))
    assert hidden.grad.shape == (0, 8)


@pytest.mark.parametrize("amp_dtype", [torch.float16, torch.bfloat16])
def test_autocast_around_the_op_changes_nothing(cpu_impl, amp_dtype):
    """A model's forward under torch.autocast (RLinf's fsdp_config.amp_autocast) calls the op
    inside it: the tiles' GEMMs must stay float32, which the epilogues read as such (a
    16-bit tile read as float32 ran past its end and crashed the process)."""
    hidden, weight, labels, g_lp, g_h = make(40, 16, 3000, torch.float32, seed=7)
    want = run_op(hidden, weight, labels, 1.0, g_lp, g_h, token_chunk=16, vocab_chunk=512)
    with torch.autocast("cpu", dtype=amp_dtype):
        got = run_op(hidden, weight, labels, 1.0, g_lp, g_h, token_chunk=16, vocab_chunk=512)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and torch.equal(a, b)


def test_a_tile_that_is_not_float32_is_refused_by_the_compiled_epilogues():
    from rl.kernels.ops.logprob_epilogue import EPILOGUES

    tile = torch.zeros(4, 8, dtype=torch.float16)
    labels = torch.zeros(4, dtype=torch.int64)
    stats = torch.zeros(4, 4)
    with pytest.raises(TypeError, match="float32"):
        EPILOGUES["cpp"][0](tile, labels, 0, 1.0, stats)
