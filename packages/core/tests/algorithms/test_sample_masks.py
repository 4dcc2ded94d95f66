"""ROLL's sample masks (`algorithm.max_len_mask`, `difficulty_mask`) and its per-domain
advantages (`algorithm.advantage_by_domain`), against references written from ROLL's
`get_sample_level_mask` / `difficulty_mask` (roll/utils/functionals.py) and against the
same computation run on each domain's rows alone."""

from __future__ import annotations

import pytest
import torch

from rl.core import algorithms as alg
from rl.core.config import load_config
from rl.core.trainer import algorithm_setup


def roll_difficulty_reference(scores, n, low, high):
    """ROLL's rule on consecutive groups of n samples, in float64 loops."""
    keep = []
    for start in range(0, len(scores), n):
        mean = sum(scores[start : start + n]) / n
        keep += [1.0 if low < mean < high else 0.0] * n
    return keep


@pytest.mark.parametrize(("low", "high"), [(0.0, 1.0), (0.1, 0.95), (0.3, 0.7)])
def test_difficulty_mask_matches_rolls_group_rule(low, high):
    gen = torch.Generator().manual_seed(0)
    n = 4
    scores = torch.rand(32, generator=gen) < torch.rand(8, generator=gen).repeat_interleave(n)
    scores = scores.float().tolist()
    groups = alg.group_index([f"p{i // n}" for i in range(32)])
    got = alg.difficulty_mask(torch.tensor(scores), groups, low, high)
    assert got.tolist() == roll_difficulty_reference(scores, n, low, high)


def test_difficulty_mask_bounds_are_exclusive():
    groups = torch.tensor([0, 0, 1, 1, 2, 2])
    accuracy = torch.tensor([0.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    assert alg.difficulty_mask(accuracy, groups, 0.0, 1.0).tolist() == [0, 0, 0, 0, 1, 1]


def test_max_len_mask_masks_responses_cut_at_the_limit():
    assert alg.max_len_mask(torch.tensor([3, 8, 7, 8]), 8).tolist() == [
        1.0,
        0.0,
        1.0,
        0.0,
    ]


def _batch(rows=8, length=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([4, 2, 4, 3, 1, 4, 2, 3])[:rows]
    mask = (torch.arange(length)[None, :] < lengths[:, None]).float()
    scores = torch.zeros(rows, length)
    sequence = torch.randint(0, 2, (rows,), generator=gen).float()
    scores[torch.arange(rows), lengths - 1] = sequence.to(scores.dtype)
    return {
        "token_level_scores": scores,
        "token_level_rewards": scores.clone(),
        "response_mask": mask,
        "responses": torch.zeros(rows, length, dtype=torch.long),
    }, sequence


UIDS = ["a", "a", "b", "b", "c", "c", "d", "d"]


def test_masked_responses_leave_the_loss_and_the_whitening_but_not_their_group_mean():
    config = load_config(
        None,
        [
            "algorithm.adv_estimator=grpo",
            "algorithm.whiten_advantages=true",
            "algorithm.max_len_mask=true",
            "data.max_response_length=4",
        ],
    )
    batch, _ = _batch()
    mask = batch["response_mask"].clone()
    metrics = algorithm_setup.assign_advantages(config, batch, UIDS)
    cut = mask.sum(-1) == 4
    kept = mask * (~cut).float()[:, None]
    assert torch.equal(batch["response_mask"], kept)
    # the same GRPO advantages (group means over all responses), whitened over kept tokens
    plain, _ = _batch()
    algorithm_setup.assign_advantages(
        load_config(None, ["algorithm.adv_estimator=grpo"]), plain, UIDS
    )
    expected = alg.whiten(plain["advantages"], kept, "roll")
    assert torch.allclose(batch["advantages"] * kept, expected * kept)
    assert metrics["actor/max_len_mask_ratio"] == pytest.approx(1 - float(cut.float().mean()))
    assert metrics["actor/samples_used"] == float((~cut).sum())
    assert metrics["actor/samples_total"] == 8.0


def test_difficulty_mask_reads_the_scorers_accuracy_and_counts_its_ratio():
    config = load_config(
        None,
        [
            "algorithm.difficulty_mask=true",
            "algorithm.difficulty_low_threshold=0.1",
            "algorithm.difficulty_high_threshold=0.9",
        ],
    )
    batch, _ = _batch()
    accuracy = [1, 0, 1, 1, 0, 0, 0, 1]  # groups: mixed, all right, all wrong, mixed
    metrics = algorithm_setup.assign_advantages(config, batch, UIDS, accuracy=accuracy)
    kept_rows = batch["response_mask"].sum(-1) > 0
    assert kept_rows.tolist() == [True, True, False, False, False, False, True, True]
    assert metrics["actor/difficulty_mask_ratio"] == 0.5
    assert metrics["actor/final_mask_ratio"] == 0.5


def test_masks_off_change_nothing():
    batch, _ = _batch()
    before = batch["response_mask"].clone()
    metrics = algorithm_setup.assign_advantages(load_config(None, []), batch, UIDS)
    assert torch.equal(batch["response_mask"], before)
    assert not any("mask_ratio" in key for key in metrics)


def test_advantages_by_domain_whiten_each_domains_rows_alone():
    overrides = ["algorithm.adv_estimator=grpo", "algorithm.whiten_advantages=true"]
    domains = ["math"] * 4 + ["code"] * 4
    by_domain, _ = _batch()
    config = load_config(None, [*overrides, "algorithm.advantage_by_domain=true"])
    algorithm_setup.assign_advantages(config, by_domain, UIDS, domains=domains)
    for rows in (slice(0, 4), slice(4, 8)):
        alone, _ = _batch()
        alone = {key: value[rows] for key, value in alone.items()}
        algorithm_setup.assign_advantages(load_config(None, overrides), alone, UIDS[rows])
        assert torch.allclose(by_domain["advantages"][rows], alone["advantages"])
    # over the whole batch, the whitening differs
    whole, _ = _batch()
    algorithm_setup.assign_advantages(load_config(None, overrides), whole, UIDS, domains=domains)
    assert not torch.allclose(whole["advantages"], by_domain["advantages"])
