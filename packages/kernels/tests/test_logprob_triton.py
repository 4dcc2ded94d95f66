"""The fused Triton kernels of fused_logprob_entropy, run on CPU by Triton's interpreter.

Triton reads TRITON_INTERPRET when a kernel is decorated, so the cases run in one
child process that sets it before importing anything; the child reports errors
against a float64 reference (full logits, autograd) as JSON, and the assertions
are made here. The interpreter costs ~4 ms per program: shapes stay tiny, but
span masked token rows, H not a multiple of the K block, several vocabulary
blocks per program and a partial last one.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("triton")

CHILD = textwrap.dedent(
    """
    import json, math, sys
    import torch
    from rl.kernels import fused_logprob_entropy
    from rl.kernels.ops import logprob_epilogue, logprob_tiles
    from rl.kernels.ops.logprob import chosen_impl, logprob_grads, logprob_stats

    assert chosen_impl("cpu") == "triton", chosen_impl("cpu")

    def make(tokens, hidden_size, vocab, dtype, seed, scale=1.0):
        g = torch.Generator().manual_seed(seed)
        h = (torch.randn(tokens, hidden_size, generator=g) * scale).to(dtype)
        w = (torch.randn(vocab, hidden_size, generator=g) / math.sqrt(hidden_size)).to(dtype)
        y = torch.randint(vocab, (tokens,), generator=g)
        return h, w, y, torch.randn(tokens, generator=g), torch.randn(tokens, generator=g)

    def float64_reference(h, w, y, temperature, g_lp, g_h):
        h = h.double().requires_grad_(True)
        w = w.double().requires_grad_(True)
        logp = torch.log_softmax(h @ w.t() / temperature, -1)
        lp = logp.gather(1, y[:, None])[:, 0]
        ent = -(logp.exp() * logp).sum(-1)
        grads = torch.autograd.grad((lp * g_lp).sum() + (ent * g_h).sum(), (h, w))
        return (lp, ent, *grads)

    def rel_error(actual, expected):
        scale = expected.abs().max().item() + 1.0
        return (actual.double() - expected).abs().max().item() / scale

    def case(tokens, hidden_size, vocab, dtype, temperature, seed, scale=1.0, **chunks):
        h, w, y, g_lp, g_h = make(tokens, hidden_size, vocab, dtype, seed, scale)
        hh, ww = h.clone().requires_grad_(True), w.clone().requires_grad_(True)
        lp, ent = fused_logprob_entropy(hh, ww, y, temperature, **chunks)
        ((lp * g_lp).sum() + (ent * g_h).sum()).backward()
        want = float64_reference(h, w, y, temperature, g_lp, g_h)
        got = (lp, ent, hh.grad, ww.grad)
        names = ("logprob", "entropy", "grad_hidden", "grad_weight")
        result = {n: rel_error(a, e) for n, a, e in zip(names, got, want)}
        result["bounds_ok"] = bool(
            (lp <= 0).all() and (ent >= 0).all() and (ent <= math.log(vocab)).all()
        )
        result["dtypes_ok"] = (lp.dtype, ent.dtype, hh.grad.dtype, ww.grad.dtype) == (
            torch.float32, torch.float32, dtype, dtype
        )
        return result

    def vocab_slice_case():
        # One rank's slice (rows 10..29 of 37): labels inside and outside it.
        h, w, y, g_lp, g_h = make(9, 8, 37, torch.float32, seed=4)
        part = w[10:30]
        got = logprob_stats(h, part, y, 0.9, 10, 4, 16)
        tiling = logprob_tiles.Tiling(0.9, 10, 4, 16)
        want = logprob_tiles.tiled_stats(h, part, y, tiling, logprob_epilogue.forward_reference)
        lse, mean_x = want[0] + want[1].log(), want[2] / want[1]
        per_row = logprob_tiles.RowGrads(lse, mean_x, g_lp, g_h)
        grads = logprob_grads(h, part, y, *tiling, *per_row)
        dlogits = logprob_tiles.dlogits_from_tiles(logprob_epilogue.backward_reference)
        want_grads = logprob_tiles.chunked_grads(
            h, part, y, tiling, per_row, dlogits, torch.float32
        )
        errors = [(got - want).abs().max()] + [
            (a - b).abs().max() for a, b in zip(grads, want_grads)
        ]
        return {"max_abs": max(float(e) for e in errors)}

    results = {
        "fp32_two_blocks_per_split": case(5, 8, 37, torch.float32, 0.7, 0, token_chunk=3,
                                          vocab_chunk=32),
        "bf16_single_token_extreme": case(1, 8, 37, torch.bfloat16, 1.3, 1, scale=60.0),
        "fp16_masked_rows_odd_h": case(17, 24, 50, torch.float16, 1.0, 2, vocab_chunk=16),
        "vocab_slice": vocab_slice_case(),
    }
    h, w, y, g_lp, g_h = make(6, 8, 21, torch.float32, seed=3)
    hh = h.clone().requires_grad_(True)
    lp, none = fused_logprob_entropy(hh, w, y, entropy=False)
    (lp * g_lp).sum().backward()
    want = float64_reference(h, w, y, 1.0, g_lp, torch.zeros(6))
    results["entropy_off"] = {
        "is_none": none is None, "grad_hidden": rel_error(hh.grad, want[2])
    }
    print(json.dumps(results))
    """
)

TOLERANCE = {"fp32": 2e-5, "bf16": 2e-2, "fp16": 5e-3}


@pytest.fixture(scope="module")
def results():
    env = {**os.environ, "TRITON_INTERPRET": "1", "RL_KERNELS_IMPL": "triton"}
    child = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300
    )
    assert child.returncode == 0, child.stderr[-3000:]
    return json.loads(child.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "name", ["fp32_two_blocks_per_split", "bf16_single_token_extreme", "fp16_masked_rows_odd_h"]
)
def test_fused_kernels_match_float64_reference(results, name):
    case = results[name]
    tolerance = TOLERANCE[name.split("_")[0]]
    assert case.pop("bounds_ok"), "logprob <= 0 <= entropy <= log V violated"
    assert case.pop("dtypes_ok"), "outputs must be fp32, gradients in the input dtypes"
    too_far = {k: v for k, v in case.items() if v > tolerance}
    assert not too_far, f"relative errors above {tolerance}: {too_far}"


def test_vocab_slice_offsets_match_the_tiled_reference(results):
    """vocab_start shifts labels into the slice; labels outside it contribute 0."""
    assert results["vocab_slice"]["max_abs"] < 1e-5


def test_entropy_off_gives_none_and_logprob_gradients(results):
    assert results["entropy_off"]["is_none"]
    assert results["entropy_off"]["grad_hidden"] < 2e-5
