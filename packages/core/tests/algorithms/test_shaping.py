"""ROLL's shaping and its `reinforce` estimator against float64 formulas written from
ROLL's code (roll/utils/functionals.py at 8eb27cc2: `compute_reinforce_return`,
`masked_whiten` with Bessel's correction and 1e-8, `compute_advantage`'s clip after the
whitening, `reward_postprocess`'s clamp), on padded and packed layouts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rl.core import algorithms as alg


def _batch(seed: int = 0):
    generator = np.random.default_rng(seed)
    rewards = generator.normal(size=(4, 6)) * 3
    lengths = [6, 3, 5, 1]
    mask = np.zeros((4, 6))
    for row, length in enumerate(lengths):
        mask[row, :length] = 1
    return rewards * mask, mask


def _roll_return(rewards, gamma):
    out = np.zeros_like(rewards)
    for row in range(rewards.shape[0]):
        running = 0.0
        for t in reversed(range(rewards.shape[1])):
            running = rewards[row, t] + gamma * running
            out[row, t] = running
    return out


def _roll_whiten(values, mask):
    valid = values[mask.astype(bool)]
    mean = valid.mean()
    var = ((valid - mean) ** 2).sum() / (valid.size - 1)
    return (values - mean) / np.sqrt(var + 1e-8) * mask


@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_reinforce_is_the_discounted_return_without_baseline(gamma):
    rewards, mask = _batch()
    advantages, returns = alg.compute_advantages(
        "reinforce", torch.tensor(rewards), torch.tensor(mask), gamma=gamma
    )
    expected = _roll_return(rewards, gamma) * mask
    np.testing.assert_allclose(advantages.numpy(), expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(returns.numpy(), expected, rtol=0, atol=1e-12)
    # not GRPO: an outcome reward stays as it is on every token (no group mean, no std)
    outcome = np.zeros((2, 3))
    outcome[:, -1] = [1.0, 0.0]
    same, _ = alg.compute_advantages(
        "reinforce", torch.tensor(outcome), torch.ones(2, 3, dtype=torch.float64)
    )
    assert same.tolist() == [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]


def test_reinforce_on_packed_tokens_equals_padded():
    rewards, mask = _batch(1)
    padded, _ = alg.compute_advantages(
        "reinforce", torch.tensor(rewards), torch.tensor(mask), gamma=0.8
    )
    valid = torch.tensor(mask).bool()
    seq_ids = torch.arange(4).unsqueeze(1).expand(4, 6)[valid]
    packed, _ = alg.compute_advantages(
        "reinforce",
        torch.tensor(rewards)[valid],
        torch.ones(int(valid.sum()), dtype=torch.float64),
        gamma=0.8,
        seq_ids=seq_ids,
    )
    torch.testing.assert_close(packed, padded[valid])


def test_whiten_is_rolls_masked_whiten_over_the_batch():
    values, mask = _batch(2)
    got = alg.whiten(torch.tensor(values), torch.tensor(mask))
    np.testing.assert_allclose(got.numpy(), _roll_whiten(values, mask), rtol=0, atol=1e-12)
    # fewer than two valid tokens: ROLL leaves them (its unbiased variance is undefined)
    one = torch.tensor([[2.0, 0.0]], dtype=torch.float64)
    assert alg.whiten(one, torch.tensor([[1.0, 0.0]])).tolist() == [[2.0, 0.0]]


def test_clip_clamps_symmetrically_and_counts_the_valid_entries_outside():
    values, mask = _batch(3)
    clipped, share = alg.clip_values(torch.tensor(values), 2.0, torch.tensor(mask))
    np.testing.assert_array_equal(clipped.numpy(), np.clip(values, -2.0, 2.0))
    valid = mask.astype(bool)
    assert share == pytest.approx((np.abs(values[valid]) > 2.0).mean())
    with pytest.raises(ValueError, match="clip bound"):
        alg.clip_values(torch.tensor(values), 0.0)


def test_rolls_advantage_order_whiten_then_clip():
    """ROLL's compute_advantage for reinforce + whiten_advantages + advantage_clip."""
    rewards, mask = _batch(4)
    advantages, _ = alg.compute_advantages(
        "reinforce", torch.tensor(rewards), torch.tensor(mask), gamma=1.0
    )
    shaped, _ = alg.clip_values(alg.whiten(advantages, torch.tensor(mask)), 0.5)
    expected = np.clip(_roll_whiten(_roll_return(rewards, 1.0) * mask, mask), -0.5, 0.5)
    np.testing.assert_allclose(shaped.numpy(), expected, rtol=0, atol=1e-12)


def _rlinf_masked_normalization():
    """RLinf's own `masked_normalization` (rlinf/utils/distributed.py of the 0.3.0 wheel,
    fetched by scripts/fetch-upstream.sh), its source executed alone: the module imports
    RLinf's scheduler (Ray and more), the function itself needs numpy and torch; its
    `.cuda()` moves are the identity here (a test-only oracle, never imported by rl)."""
    import ast
    from pathlib import Path
    from typing import Optional

    source = (
        Path(__file__).resolve().parents[4] / ".upstream/rlinf-0.3.0/rlinf/utils/distributed.py"
    )
    if not source.is_file():
        pytest.fail(f"{source} is missing: run scripts/fetch-upstream.sh")
    tree = ast.parse(source.read_text())
    (function,) = [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name == "masked_normalization"
    ]
    namespace = {"np": np, "torch": torch, "Optional": Optional, "ProcessGroup": object}
    exec(compile(ast.Module([function], []), str(source), "exec"), namespace)
    return namespace["masked_normalization"]


def test_rlinfs_whitening_is_rlinfs_own_masked_normalization(monkeypatch):
    monkeypatch.setattr(torch.Tensor, "cuda", lambda self, *a, **k: self)
    oracle = _rlinf_masked_normalization()
    values, mask = _batch(3)
    ours = alg.whiten(torch.tensor(values, dtype=torch.float32), torch.tensor(mask), "rlinf")
    theirs = oracle(torch.tensor(values, dtype=torch.float32), torch.tensor(mask).bool())
    valid = torch.tensor(mask).bool()
    assert torch.allclose(ours[valid], theirs[valid], rtol=0, atol=1e-6)
    assert (ours[~valid] == 0).all()  # RLinf leaves (0 - mean) / std there; both unread
    # not the ROLL style: population std + 1e-5 against sample variance + 1e-8
    roll = alg.whiten(torch.tensor(values, dtype=torch.float32), torch.tensor(mask), "roll")
    assert (roll[valid] - ours[valid]).abs().max() > 1e-3
    with pytest.raises(ValueError, match="whiten style 'verl'"):
        alg.whiten(torch.tensor(values), torch.tensor(mask), "verl")
