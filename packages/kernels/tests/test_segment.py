"""segment_sum / segment_mean / segment_max against float64 Python loops.

Segment ids come sorted (as `segment_ids(layout)` gives them) and shuffled (as
rl.core's packed `seq_ids` may be), with empty segments and masks; gradients by
gradcheck; the Triton kernel runs in a child process under TRITON_INTERPRET=1.
"""

import json
import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl.kernels import packed_layout, segment_ids, segment_max, segment_mean, segment_sum

FAST = settings(max_examples=40, derandomize=True, deadline=None)
REDUCTIONS = {"sum": segment_sum, "mean": segment_mean, "max": segment_max}


@st.composite
def segments(draw, max_tokens=12, max_segments=5):
    """(values float64 [N], seg_ids [N], S, mask [N] 0/1 or None)."""
    num_segments = draw(st.integers(0, max_segments))
    tokens = draw(st.integers(0, max_tokens)) if num_segments else 0
    ids = draw(st.lists(st.integers(0, max(num_segments - 1, 0)), min_size=tokens, max_size=tokens))
    if draw(st.booleans()):
        ids.sort()
    values = draw(st.lists(st.floats(-100, 100, allow_nan=False), min_size=tokens, max_size=tokens))
    mask = draw(st.none() | st.lists(st.integers(0, 1), min_size=tokens, max_size=tokens))
    return (
        torch.tensor(values, dtype=torch.float64),
        torch.tensor(ids, dtype=torch.int64),
        num_segments,
        None if mask is None else torch.tensor(mask, dtype=torch.int64),
    )


def loop_reference(values, seg_ids, num_segments, mask, reduce):
    """float64 [S]; empty segments: sum 0, mean 0, max -inf."""
    keep = [True] * len(values) if mask is None else [bool(m) for m in mask]
    out = []
    for s in range(num_segments):
        picked = [float(v) for v, i, k in zip(values, seg_ids, keep, strict=True) if i == s and k]
        if reduce == "sum":
            out.append(math.fsum(picked))
        elif reduce == "mean":
            out.append(math.fsum(picked) / len(picked) if picked else 0.0)
        else:
            out.append(max(picked, default=-math.inf))
    return torch.tensor(out, dtype=torch.float64)


@FAST
@given(case=segments(), reduce=st.sampled_from(sorted(REDUCTIONS)))
def test_matches_the_loop_reference(case, reduce):
    values, seg_ids, num_segments, mask = case
    got = REDUCTIONS[reduce](values, seg_ids, num_segments, mask)
    assert got.dtype == torch.float64 and got.shape == (num_segments,)
    torch.testing.assert_close(got, loop_reference(values, seg_ids, num_segments, mask, reduce))


@pytest.mark.parametrize("reduce", sorted(REDUCTIONS))
@pytest.mark.parametrize("masked", [False, True])
def test_gradcheck(reduce, masked):
    # Distinct values: max has a unique winner per segment, so it is differentiable.
    values = torch.randperm(9, dtype=torch.float64).add_(0.25).requires_grad_(True)
    seg_ids = torch.tensor([2, 0, 0, 2, 2, 3, 0, 3, 3])
    mask = torch.tensor([1, 1, 0, 1, 0, 1, 1, 0, 1]) if masked else None
    # Segments 1 and 4 are empty: their max, -inf, has no finite differences.
    kept = [0, 1, 2, 3, 4] if reduce != "max" else [0, 2, 3]

    def function(v):
        return REDUCTIONS[reduce](v, seg_ids, 5, mask)[kept]

    torch.autograd.gradcheck(function, (values,))
    torch.autograd.gradgradcheck(function, (values,))


@pytest.mark.parametrize("reduce", sorted(REDUCTIONS))
def test_masked_tokens_get_no_gradient(reduce):
    values = torch.tensor([1.0, 5.0, 2.0, 3.0], requires_grad=True)
    mask = torch.tensor([True, False, True, False])
    REDUCTIONS[reduce](values, torch.tensor([0, 0, 1, 1]), 2, mask).sum().backward()
    assert values.grad[1] == 0 and values.grad[3] == 0


def test_max_splits_the_gradient_evenly_among_ties():
    values = torch.tensor([1.0, 3.0, 3.0, 2.0, 3.0, 0.0], requires_grad=True)
    seg_ids = torch.tensor([0, 0, 0, 1, 1, 2])
    mask = torch.tensor([1, 1, 1, 1, 0, 1])  # the masked 3.0 is no tie in segment 1
    out = segment_max(values, seg_ids, 4, mask)
    assert out.tolist() == [3.0, 2.0, 0.0, -math.inf]
    (out[:3] * torch.tensor([2.0, 1.0, 1.0])).sum().backward()
    assert values.grad.tolist() == [0.0, 1.0, 1.0, 1.0, 0.0, 1.0]


def test_empty_segments_are_identities():
    values = torch.tensor([4.0, -2.0], requires_grad=True)
    seg_ids, mask = torch.tensor([1, 1]), torch.tensor([1, 0])
    assert segment_sum(values, seg_ids, 3, mask).tolist() == [0.0, 4.0, 0.0]
    assert segment_mean(values, seg_ids, 3, mask).tolist() == [0.0, 4.0, 0.0]
    assert segment_max(values, seg_ids, 3, mask).tolist() == [-math.inf, 4.0, -math.inf]
    segment_max(values, seg_ids, 3, mask).sum().backward()
    assert values.grad.tolist() == [1.0, 0.0]
    assert segment_sum(values[:0], seg_ids[:0], 0).shape == (0,)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_accumulates_in_float32(dtype):
    values = torch.full((4096,), 0.1).to(dtype)
    seg_ids = torch.zeros(4096, dtype=torch.int64)
    got = segment_sum(values, seg_ids, 1)
    assert got.dtype == dtype
    # Summed in float32, rounded once: a 16-bit running sum would stall far below.
    want = values.double().sum()
    assert abs(got.double().item() - want.item()) <= torch.finfo(dtype).eps * want.item()


def test_works_on_a_packed_layout_with_int32_ids_and_float_mask():
    layout = packed_layout(torch.tensor([[0, 1, 1], [0, 0, 0], [1, 1, 1]]))
    seg = segment_ids(layout)
    values = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    mask = torch.tensor([1.0, 1.0, 0.0, 1.0, 1.0])
    assert segment_sum(values, seg.int(), 3, mask, contiguous=True).tolist() == [3.0, 0.0, 9.0]
    assert segment_mean(values, seg, 3, mask).tolist() == [1.5, 0.0, 4.5]


@pytest.mark.parametrize("reduce", sorted(REDUCTIONS))
@pytest.mark.parametrize("masked", [False, True])
def test_opcheck(reduce, masked):
    values = torch.randn(7, requires_grad=True)
    seg_ids = torch.tensor([0, 0, 1, 1, 1, 3, 3])
    mask = torch.tensor([1, 0, 1, 1, 0, 1, 1], dtype=torch.bool) if masked else None
    args = (values, seg_ids, mask, 4, reduce, True)
    torch.library.opcheck(torch.ops.rl_kernels.segment_reduce.default, args)


def test_errors_name_the_shapes():
    values, seg_ids = torch.zeros(4), torch.zeros(4, dtype=torch.int64)
    with pytest.raises(ValueError, match=r"got shapes \(4,\) and \(3,\)"):
        segment_sum(values, seg_ids[:3], 1)
    with pytest.raises(ValueError, match=r"got shapes \(2, 2\) and \(2, 2\)"):
        segment_sum(values.view(2, 2), seg_ids.view(2, 2), 1)
    with pytest.raises(ValueError, match=r"mask must be \[N\] = \[4\] like values, got \(5,\)"):
        segment_mean(values, seg_ids, 1, torch.ones(5))
    with pytest.raises(ValueError, match="values must be a floating"):
        segment_max(seg_ids, seg_ids, 1)
    with pytest.raises(ValueError, match="num_segments must be >= 0"):
        segment_sum(values, seg_ids, -1)
    with pytest.raises(ValueError, match="reduce must be one of"):
        torch.ops.rl_kernels.segment_reduce(values, seg_ids, None, 1, "min", False)


def test_forcing_triton_on_unsorted_ids_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("RL_KERNELS_IMPL", "triton")
    with pytest.raises(RuntimeError, match="segment_reduce has no usable triton"):
        segment_sum(torch.zeros(2), torch.tensor([1, 0]), 2)


# --- Triton, interpreted on CPU -------------------------------------------------

TRITON_CHILD = textwrap.dedent(
    """
    import json, math
    import torch
    from rl.kernels import segment_max, segment_mean, segment_sum
    from rl.kernels.ops import segment, segment_triton

    assert segment.chosen_impl("cpu") == "triton"
    g = torch.Generator().manual_seed(0)
    results = {}
    # Lengths span empty segments, one token, and several blocks of 4 with a partial one.
    lengths = torch.tensor([0, 1, 9, 0, 4, 13, 0])
    seg_ids = torch.repeat_interleave(torch.arange(len(lengths)), lengths)
    num = len(lengths)
    values = torch.randn(seg_ids.numel(), generator=g, dtype=torch.float64)
    mask = torch.rand(seg_ids.numel(), generator=g) < 0.7
    for dtype in (torch.float64, torch.float32, torch.bfloat16):
        for reduce in ("sum", "mean", "max"):
            for m in (None, mask):
                v = values.to(dtype)
                want = segment.segment_reduce_reference(v.double(), seg_ids, m, num, reduce)
                got = segment_triton.segment_reduce(v, seg_ids, m, num, reduce, block=4)
                same_inf = bool((got.isinf() == want.isinf()).all())
                finite = ~want.isinf()
                error = (got.double() - want)[finite].abs().max().item()
                key = f"{reduce}_{str(dtype)[6:]}_{'mask' if m is not None else 'all'}"
                results[key] = {"error": error, "inf_ok": same_inf, "dtype_ok": got.dtype == dtype}
    # Through the public API (default block) with gradients; the backward is torch's.
    v = values.float().requires_grad_(True)
    out = segment_mean(v, seg_ids, num, mask, contiguous=True)
    out.sum().backward()
    ref_v = values.float().requires_grad_(True)
    want = segment.segment_reduce_reference(ref_v, seg_ids, mask, num, "mean")
    want.sum().backward()
    results["api_mean"] = {
        "error": (out - want).abs().max().item(),
        "grad_error": (v.grad - ref_v.grad).abs().max().item(),
    }
    results["api_empty"] = {"shape": list(segment_max(v[:0], seg_ids[:0], 0, contiguous=True).shape)}
    print(json.dumps(results))
    """
)

TRITON_TOLERANCE = {"float64": 1e-12, "float32": 1e-5, "bfloat16": 3e-2}


@pytest.fixture(scope="module")
def triton_results():
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1", "RL_KERNELS_IMPL": "triton"}
    child = subprocess.run(
        [sys.executable, "-c", TRITON_CHILD], env=env, capture_output=True, text=True, timeout=300
    )
    assert child.returncode == 0, child.stderr[-3000:]
    return json.loads(child.stdout.strip().splitlines()[-1])


def test_triton_kernel_matches_the_reference(triton_results):
    cases = {k: v for k, v in triton_results.items() if not k.startswith("api_")}
    assert len(cases) == 18
    for name, case in cases.items():
        assert case["inf_ok"] and case["dtype_ok"], name
        assert case["error"] <= TRITON_TOLERANCE[name.split("_")[1]], (name, case)


def test_triton_through_the_public_api(triton_results):
    assert triton_results["api_mean"]["error"] < 1e-6
    assert triton_results["api_mean"]["grad_error"] == 0
    assert triton_results["api_empty"]["shape"] == [0]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_triton_on_gpu_matches_the_reference(monkeypatch, dtype):
    lengths = torch.tensor([0, 1, 1023, 1024, 1025, 0, 5000, 7], device="cuda")
    seg_ids = torch.repeat_interleave(torch.arange(8, device="cuda"), lengths)
    values = torch.randn(seg_ids.numel(), device="cuda").to(dtype)
    mask = torch.rand(seg_ids.numel(), device="cuda") < 0.8
    for reduce, function in REDUCTIONS.items():
        monkeypatch.setenv("RL_KERNELS_IMPL", "triton")
        got = function(values, seg_ids, 8, mask, contiguous=True)
        monkeypatch.setenv("RL_KERNELS_IMPL", "reference")
        want = function(values.double(), seg_ids, 8, mask)
        assert got.dtype == dtype and torch.equal(got.isinf(), want.isinf()), reduce
        finite = ~want.isinf()
        error = (got.double() - want)[finite].abs().max().item()
        assert error <= 1e-3 * (want[finite].abs().max().item() + 1), (reduce, error)
