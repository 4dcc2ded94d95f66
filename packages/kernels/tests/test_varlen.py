"""PackedLayout, unpad / pad, packed position ids, labels and segment ids.

Masks are drawn by hypothesis (derandomized): empty rows, full rows, left and
right padding and holes, mixed in one batch; everything is checked against
plain Python loops over the mask.
"""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl.kernels import (
    PackedLayout,
    packed_labels,
    packed_layout,
    packed_position_ids,
    pad,
    segment_ids,
    unpad,
)

FAST = settings(max_examples=40, derandomize=True, deadline=None)


@st.composite
def masks(draw, max_batch=4, max_seqlen=6):
    """[B, L] 0/1 int masks; each row right-, left-padded, empty, full or with holes."""
    batch = draw(st.integers(0, max_batch))
    seqlen = draw(st.integers(0, max_seqlen))
    rows = []
    for _ in range(batch):
        length = draw(st.integers(0, seqlen))
        style = draw(st.sampled_from(["right", "left", "holes"]))
        if style == "right":
            row = [1] * length + [0] * (seqlen - length)
        elif style == "left":
            row = [0] * (seqlen - length) + [1] * length
        else:
            row = draw(st.lists(st.integers(0, 1), min_size=seqlen, max_size=seqlen))
        rows.append(row)
    return torch.tensor(rows, dtype=torch.int64).reshape(batch, seqlen)


def loop_sequences(mask):
    """Per row, the flat positions of its real tokens (Python reference)."""
    batch, seqlen = mask.shape
    return [[b * seqlen + t for t in range(seqlen) if mask[b, t]] for b in range(batch)]


@FAST
@given(mask=masks(), dtype=st.sampled_from([torch.int64, torch.bool, torch.float32]))
def test_layout_matches_a_loop_over_the_mask(mask, dtype):
    layout = packed_layout(mask.to(dtype))
    sequences = loop_sequences(mask)
    assert layout.indices.dtype == torch.int64 and layout.cu_seqlens.dtype == torch.int32
    assert layout.indices.tolist() == [i for seq in sequences for i in seq]
    lengths = [len(seq) for seq in sequences]
    assert layout.cu_seqlens.tolist() == [sum(lengths[:b]) for b in range(len(lengths) + 1)]
    assert layout.max_seqlen == max(lengths, default=0)
    assert (layout.batch, layout.seqlen) == tuple(mask.shape)
    assert layout.num_tokens == sum(lengths)


@FAST
@given(mask=masks(), value=st.sampled_from([0, -1.5, 7]))
def test_pad_of_unpad_restores_real_tokens_and_fills_padding(mask, value):
    x = torch.randn(*mask.shape, 3)
    layout = packed_layout(mask)
    packed = unpad(x, layout)
    assert packed.shape == (layout.num_tokens, 3)
    restored = pad(packed, layout, value=value)
    real = mask.bool()
    assert torch.equal(restored[real], x[real])
    assert (restored[~real] == value).all()
    assert torch.equal(unpad(restored, layout), packed)


@FAST
@given(mask=masks())
def test_pad_and_unpad_keep_integer_ids_and_trailing_dims(mask):
    layout = packed_layout(mask)
    ids = torch.randint(0, 1000, mask.shape)
    packed = unpad(ids, layout)
    assert packed.dtype == torch.int64 and packed.shape == (layout.num_tokens,)
    padded = pad(packed, layout, value=-7)
    assert torch.equal(padded, torch.where(mask.bool(), ids, -7))
    hidden = torch.randn(*mask.shape, 2, 3)
    assert torch.equal(pad(unpad(hidden, layout), layout)[mask.bool()], hidden[mask.bool()])


@FAST
@given(mask=masks())
def test_position_ids_labels_and_segment_ids_match_loops(mask):
    layout = packed_layout(mask)
    sequences = loop_sequences(mask)
    ids = torch.randint(0, 50, mask.shape)
    packed_ids = unpad(ids, layout)
    want_positions, want_labels, want_segments = [], [], []
    for b, seq in enumerate(sequences):
        tokens = [int(ids.view(-1)[i]) for i in seq]
        want_positions += list(range(len(seq)))
        want_labels += tokens[1:] + [-100] * bool(seq)
        want_segments += [b] * len(seq)
    assert packed_position_ids(layout).tolist() == want_positions
    assert packed_labels(packed_ids, layout).tolist() == want_labels
    assert segment_ids(layout).tolist() == want_segments
    assert packed_position_ids(layout).dtype == segment_ids(layout).dtype == torch.int64


@FAST
@given(mask=masks(max_batch=6, max_seqlen=8))
def test_labels_never_cross_a_sequence_boundary(mask):
    layout = packed_layout(mask)
    seg = segment_ids(layout)
    # Token = 100 * its sequence + its position: a label names its own sequence.
    packed_ids = seg * 100 + packed_position_ids(layout)
    labels = packed_labels(packed_ids, layout, ignore_index=-1)
    kept = labels != -1
    assert torch.equal(labels[kept] // 100, seg[kept])
    assert torch.equal(labels[kept], packed_ids[kept] + 1)
    assert int((~kept).sum()) == int((layout.seqlens > 0).sum())


def test_gradients_of_unpad_and_pad():
    mask = torch.tensor([[0, 1, 1, 0], [0, 0, 0, 0], [1, 0, 1, 1]])
    layout = packed_layout(mask)
    x = torch.randn(3, 4, 2, dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(lambda t: unpad(t, layout), (x,))
    torch.autograd.gradgradcheck(lambda t: unpad(t, layout), (x,))
    packed = torch.randn(layout.num_tokens, 2, dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(lambda t: pad(t, layout, value=3.0), (packed,))
    torch.autograd.gradgradcheck(lambda t: pad(t, layout, value=3.0), (packed,))
    # The padding of x gets no gradient.
    unpad(x, layout).sum().backward()
    assert torch.equal(x.grad[..., 0], mask.double())


def test_opcheck_unpad_and_pad():
    layout = packed_layout(torch.tensor([[1, 1, 0], [0, 1, 1]]))
    x = torch.randn(2, 3, 4, requires_grad=True)
    torch.library.opcheck(torch.ops.rl_kernels.unpad.default, (x, layout.indices))
    packed = torch.randn(4, 5, requires_grad=True)
    args = (packed, layout.indices, 2, 3, -1.0)
    torch.library.opcheck(torch.ops.rl_kernels.pad.default, args)
    ids = torch.arange(4)
    torch.library.opcheck(torch.ops.rl_kernels.pad.default, (ids, layout.indices, 2, 3, 0))


def test_layout_is_frozen():
    layout = packed_layout(torch.ones(1, 2))
    assert isinstance(layout, PackedLayout)
    with pytest.raises(AttributeError):
        layout.max_seqlen = 3


def test_errors_name_the_shapes():
    with pytest.raises(ValueError, match=r"attention_mask must be \[B, L\], got shape \(5,\)"):
        packed_layout(torch.ones(5))
    with pytest.raises(ValueError, match=r"\(1, 2, 3\)"):
        packed_layout(torch.ones(1, 2, 3))
    layout = packed_layout(torch.tensor([[1, 1, 0], [0, 1, 1]]))
    with pytest.raises(ValueError, match=r"\[2, 3, \.\.\.\] for this layout, got shape \(2, 4\)"):
        unpad(torch.zeros(2, 4), layout)
    with pytest.raises(ValueError, match=r"N = 4 tokens of this layout, got shape \(5, 2\)"):
        pad(torch.zeros(5, 2), layout)
    with pytest.raises(ValueError, match=r"\[N\] = \[4\] for this layout, got shape \(3,\)"):
        packed_labels(torch.zeros(3, dtype=torch.int64), layout)
    with pytest.raises(ValueError, match="indices must be int64"):
        torch.ops.rl_kernels.unpad(torch.zeros(2, 3), layout.indices.int())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_round_trip_on_gpu():
    mask = torch.rand(8, 300, device="cuda") < 0.6
    layout = packed_layout(mask)
    x = torch.randn(8, 300, 16, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    packed = unpad(x, layout)
    assert torch.equal(pad(packed, layout)[mask], x[mask])
    packed.float().sum().backward()
    assert torch.equal(x.grad[..., 0], mask.to(x.dtype))
    assert packed_position_ids(layout).is_cuda and segment_ids(layout).is_cuda


def test_aligned_cu_seqlens_rounds_each_sequence_up():
    from rl.kernels import aligned_cu_seqlens

    cu = torch.tensor([0, 3, 3, 8, 9], dtype=torch.int32)
    assert aligned_cu_seqlens(cu, 4).tolist() == [0, 4, 4, 12, 16]
    assert aligned_cu_seqlens(cu, 1).tolist() == cu.tolist()
    with pytest.raises(ValueError, match="multiple = 0"):
        aligned_cu_seqlens(cu, 0)
