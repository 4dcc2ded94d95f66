"""Loss aggregation modes against references, and the micro-batch / data-parallel equality."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl.core import algorithms as alg
from rl.core.algorithms import LOSS_AGG_MODES, LossAggMode, agg_loss, loss_denominator

MODES = [
    "seq-mean-token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-sum-norm",
    "token-mean",
    "token-sum",
]
# the modes that take a fixed normaliser (`loss_scale_factor`)
SCALED = {"seq-mean-token-sum-norm", "token-sum"}


def case(seed, rows=8, width=5):
    g = torch.Generator().manual_seed(seed)
    loss = torch.randn(rows, width, generator=g)
    mask = (torch.rand(rows, width, generator=g) > 0.3).double()
    mask[:, 0] = 1
    return loss, mask


def reference(loss, mask, mode, scale=None):
    """Plain loops; a sequence with no valid token does not count as a sequence."""
    sums = [
        sum(x * m for x, m in zip(lr, mr, strict=True)) for lr, mr in zip(loss, mask, strict=True)
    ]
    lens = [sum(mr) for mr in mask]
    seqs = sum(1 for n in lens if n > 0)
    if mode == "token-mean":
        return sum(sums) / sum(lens)
    if mode == "seq-mean-token-sum":
        return sum(sums) / seqs
    if mode == "seq-mean-token-mean":
        return sum(s / n for s, n in zip(sums, lens, strict=True) if n) / seqs
    if mode == "token-sum":
        return sum(sums) / (scale or 1)
    return sum(sums) / (seqs * (scale or len(loss[0])))


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_matches_reference(mode):
    loss, mask = case(0)
    mask[3] = 0  # a fully padded row is not a sequence
    expected = reference(loss.tolist(), mask.tolist(), mode)
    assert agg_loss(loss, mask, mode).item() == pytest.approx(expected, rel=1e-12)
    assert agg_loss(loss, mask.bool(), mode).item() == pytest.approx(expected, rel=1e-12)


def test_dr_grpo_constant_normaliser():
    loss, mask = case(1)
    value = agg_loss(loss, mask, "seq-mean-token-sum-norm", loss_scale_factor=4096)
    expected = reference(loss.tolist(), mask.tolist(), "seq-mean-token-sum-norm", 4096)
    assert value.item() == pytest.approx(expected, rel=1e-12)


def test_token_sum_is_the_plain_sum_divided_by_the_scale_factor():
    loss, mask = case(6)
    expected = reference(loss.tolist(), mask.tolist(), "token-sum")
    assert agg_loss(loss, mask, "token-sum").item() == pytest.approx(expected, rel=1e-12)
    halved = agg_loss(loss, mask, "token-sum", loss_scale_factor=2.0)
    assert halved.item() == pytest.approx(expected / 2, rel=1e-12)
    assert loss_denominator("token-sum", mask) == 1.0
    assert loss_denominator("token-sum", torch.zeros(2, 3), loss_scale_factor=4.0) == 4.0


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean"])
def test_a_scale_factor_the_mode_ignores_is_refused(mode):
    with pytest.raises(
        ValueError,
        match=rf"actor.loss_scale_factor = 8.0 has no effect with "
        rf"loss_agg_mode '{mode}'.*applies to seq-mean-token-sum-norm, token-sum",
    ):
        alg.check_loss_scale_factor(mode, 8.0, "actor.loss_scale_factor")
    alg.check_loss_scale_factor(mode, None, "actor.loss_scale_factor")
    with pytest.raises(ValueError, match=r"critic.loss_scale_factor = -1.0; allowed: > 0"):
        alg.check_loss_scale_factor("token-sum", -1.0, "critic.loss_scale_factor")


def trim(loss, mask):
    """Pad a micro-batch to its own longest response, as dynamic padding does."""
    width = int(mask.nonzero()[:, 1].max()) + 1
    return loss[:, :width], mask[:, :width]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 1000), mode=st.sampled_from(MODES), micro=st.integers(1, 4))
def test_micro_batches_and_ranks_add_up_to_the_whole_batch(seed, mode, micro):
    """Split 8 rows over 2 'ranks' and micro-batches of `micro` rows, each padded to its own
    width; with the global denominator the pieces sum to the whole mini-batch's loss."""
    loss, mask = case(seed)
    whole = agg_loss(loss, mask, mode, loss_scale_factor=6.0)
    # what the all-reduce over both ranks yields: the sum of the ranks' counts
    denominator = loss_denominator(mode, mask, loss_scale_factor=6.0)
    total = torch.zeros(())
    for rank_rows in (range(4), range(4, 8)):
        for start in range(rank_rows.start, rank_rows.stop, micro):
            rows = slice(start, min(start + micro, rank_rows.stop))
            total = total + agg_loss(*trim(loss[rows], mask[rows]), mode, denominator)
    assert total.item() == pytest.approx(whole.item(), rel=1e-10, abs=1e-12)


WORKER = """
import json, sys, torch, torch.distributed as dist
from rl.core.algorithms import agg_loss, loss_denominator
rank, store, out, modes = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
g = torch.Generator().manual_seed(0)
loss = torch.randn(8, 5, generator=g, dtype=torch.float64)
mask = (torch.rand(8, 5, generator=g) > 0.3).double()
mask[:, 0] = 1
mine = range(4 * rank, 4 * rank + 4)
result = {}
for mode in modes:
    denominator = loss_denominator(mode, mask[mine.start : mine.stop], group=dist.group.WORLD)
    piece = sum(agg_loss(loss[r : r + 1], mask[r : r + 1], mode, denominator) for r in mine)
    dist.all_reduce(piece)
    result[mode] = [float(piece), float(agg_loss(loss, mask, mode))]
if rank == 0:
    json.dump(result, open(out, "w"))
dist.barrier()  # leave together (a lone teardown can abort gloo's peer)
dist.destroy_process_group()
"""


def test_denominator_all_reduced_over_two_gloo_ranks(tmp_path):
    """Two real processes: each normalises its micro-batches by the all-reduced count."""
    script, out = tmp_path / "worker.py", tmp_path / "result.json"
    script.write_text(WORKER)
    src = str(Path(alg.__file__).parents[3])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    store = tmp_path / "store"
    args = [str(store), str(out), *MODES]
    workers = [
        subprocess.Popen([sys.executable, str(script), str(rank), *args], env=env)
        for rank in range(2)
    ]
    assert [w.wait(timeout=120) for w in workers] == [0, 0]
    for mode, (pieces, whole) in json.loads(out.read_text()).items():
        assert pieces == pytest.approx(whole, rel=1e-12), mode


@pytest.mark.parametrize("mode", MODES)
def test_packed_sequences_equal_the_padded_batch(mode):
    loss, mask = case(2)
    valid = mask.bool()
    seq_ids = torch.arange(loss.shape[0]).unsqueeze(1).expand_as(loss)[valid]
    padded = agg_loss(loss, mask, mode, loss_scale_factor=5.0)
    packed = agg_loss(
        loss[valid], torch.ones(int(valid.sum())), mode, seq_ids=seq_ids, loss_scale_factor=5.0
    )
    assert packed.item() == pytest.approx(padded.item(), rel=1e-12)
    assert loss_denominator(mode, mask, loss_scale_factor=5.0) == loss_denominator(
        mode, torch.ones(int(valid.sum())), seq_ids, loss_scale_factor=5.0
    )


def test_packed_dr_grpo_needs_its_constant():
    with pytest.raises(ValueError, match="on packed sequences needs loss_scale_factor"):
        agg_loss(
            torch.zeros(3),
            torch.ones(3),
            "seq-mean-token-sum-norm",
            seq_ids=torch.zeros(3, dtype=torch.long),
        )


@pytest.mark.parametrize("mode", MODES)
def test_padding_does_not_matter_even_when_not_finite(mode):
    loss, mask = case(3)
    expected = agg_loss(loss, mask, mode)
    for filler in (1e6, float("nan"), float("inf")):
        noisy = torch.where(mask.bool(), loss, torch.full_like(loss, filler))
        assert agg_loss(noisy, mask, mode).item() == pytest.approx(expected.item(), rel=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_gradcheck_float64(mode):
    loss, mask = case(4, rows=3, width=4)
    loss.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: agg_loss(x, mask, mode), (loss,))
    assert torch.autograd.gradcheck(lambda x: agg_loss(x, mask, mode, 17.0), (loss,))


def test_empty_batch_gives_zero_not_nan():
    for mode in MODES:
        assert agg_loss(torch.ones(2, 3), torch.zeros(2, 3), mode).item() == 0.0


def test_registered_mode_is_usable_by_name(isolated_registries):
    def max_token(loss, mask, seq_ids):
        return torch.where(mask.bool(), loss, torch.full_like(loss, -torch.inf)).max()

    alg.register_loss_agg_mode("max")(LossAggMode(max_token, unit="tokens"))
    loss, mask = case(5)
    assert agg_loss(loss, mask, "max", denominator=1.0) == loss[mask.bool()].max()


def test_unknown_mode():
    with pytest.raises(
        ValueError,
        match=r"actor.loss_agg_mode = 'sum' is not a known loss aggregation mode; "
        r"valid: seq-mean-token-mean, seq-mean-token-sum, seq-mean-token-sum-norm, token-mean, "
        r"token-sum$",
    ):
        agg_loss(torch.zeros(1, 1), torch.ones(1, 1), "sum")
    assert LOSS_AGG_MODES.names() == MODES
    assert {name for name in MODES if LOSS_AGG_MODES.get(name).takes_scale_factor} == SCALED
