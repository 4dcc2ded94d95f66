"""Loss aggregation modes against references, and the micro-batch / data-parallel equality."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl.core.algorithms import AGG_MODES, agg_loss, loss_denominator


def case(seed, rows=8, width=5):
    g = torch.Generator().manual_seed(seed)
    loss = torch.randn(rows, width, generator=g)
    mask = (torch.rand(rows, width, generator=g) > 0.3).double()
    mask[:, 0] = 1
    return loss, mask


def reference(loss, mask, mode, constant=None):
    rows = [
        [(x, m) for x, m in zip(lr, mr, strict=True)]
        for lr, mr in zip(loss.tolist(), mask.tolist(), strict=True)
    ]
    seq_sums = [sum(x * m for x, m in row) for row in rows]
    seq_lens = [sum(m for _, m in row) for row in rows]
    if mode == "token-mean":
        return sum(seq_sums) / sum(seq_lens)
    if mode == "seq-mean-token-sum":
        return sum(seq_sums) / len(rows)
    if mode == "seq-mean-token-mean":
        return sum(s / n for s, n in zip(seq_sums, seq_lens, strict=True)) / len(rows)
    return sum(seq_sums) / (len(rows) * (constant or loss.shape[1]))


@pytest.mark.parametrize("mode", AGG_MODES)
def test_each_mode_matches_reference(mode):
    loss, mask = case(0)
    assert agg_loss(loss, mask, mode).item() == pytest.approx(
        reference(loss, mask, mode), rel=1e-12
    )


def test_dr_grpo_constant_normaliser():
    loss, mask = case(1)
    value = agg_loss(loss, mask, "seq-mean-token-sum-norm", norm_constant=4096)
    assert value.item() == pytest.approx(
        reference(loss, mask, "seq-mean-token-sum-norm", 4096), rel=1e-12
    )


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 1000), mode=st.sampled_from(AGG_MODES), micro=st.integers(1, 8))
def test_micro_batches_and_ranks_add_up_to_the_whole_batch(seed, mode, micro):
    """Split 8 rows over 2 'ranks' and micro-batches of `micro`; with the global denominator
    the pieces sum to the loss of the whole mini-batch at once."""
    loss, mask = case(seed)
    whole = agg_loss(loss, mask, mode)
    denominator = loss_denominator(mode, mask)  # what an all-reduce over both ranks yields
    total = torch.zeros(())
    for rank in range(2):
        rows = slice(rank * 4, rank * 4 + 4)
        for start in range(0, 4, micro):
            piece = slice(rows.start + start, min(rows.start + start + micro, rows.stop))
            total = total + agg_loss(loss[piece], mask[piece], mode, denominator)
    assert total.item() == pytest.approx(whole.item(), rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("mode", AGG_MODES)
def test_packed_sequences_equal_the_padded_batch(mode):
    loss, mask = case(2)
    valid = mask.bool()
    flat_loss = loss[valid]
    seq_ids = torch.arange(loss.shape[0]).unsqueeze(1).expand_as(loss)[valid]
    padded = agg_loss(loss, mask, mode, norm_constant=5.0)
    packed = agg_loss(
        flat_loss, torch.ones_like(flat_loss), mode, seq_ids=seq_ids, norm_constant=5.0
    )
    assert packed.item() == pytest.approx(padded.item(), rel=1e-12)


def test_masked_positions_do_not_matter():
    loss, mask = case(3)
    noisy = loss + 1e6 * (1 - mask)
    for mode in AGG_MODES:
        assert agg_loss(noisy, mask, mode).item() == pytest.approx(
            agg_loss(loss, mask, mode).item()
        )


def test_unknown_mode():
    with pytest.raises(
        ValueError, match=r"actor.loss_agg_mode = 'sum' .*valid: seq-mean-token-mean"
    ):
        agg_loss(torch.zeros(1, 1), torch.ones(1, 1), "sum")
