"""`algorithm.whiten_style` is what the step's advantage whitening computes: the same GRPO
advantages whitened as ROLL does (sample variance + 1e-8 under the root) or as RLinf's
normalize_advantages does (population std + 1e-5), over the whole batch."""

from __future__ import annotations

import torch

from rl.core import algorithms as alg
from rl.core.config import load_config
from rl.core.trainer import algorithm_setup


def _advantages(*overrides: str) -> torch.Tensor:
    rewards = torch.tensor([[0, 0, 1.0], [0, 0.5, 0], [0, 0, 2.0], [0, 0, 0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 1, 1], [1, 0, 0]], dtype=torch.float32)
    batch = {
        "token_level_scores": rewards,
        "token_level_rewards": rewards,
        "response_mask": mask,
        "responses": torch.zeros(4, 3, dtype=torch.long),
    }
    config = load_config(None, ["algorithm.adv_estimator=grpo", *overrides])
    algorithm_setup.assign_advantages(config, batch, ["a", "a", "b", "b"])
    return batch["advantages"], mask


def test_each_style_whitens_the_step_advantages_its_way():
    plain, mask = _advantages()
    roll, _ = _advantages("algorithm.whiten_advantages=true")
    rlinf, _ = _advantages("algorithm.whiten_advantages=true", "algorithm.whiten_style=rlinf")
    assert torch.allclose(roll, alg.whiten(plain, mask, "roll"))
    assert torch.allclose(rlinf, alg.whiten(plain, mask, "rlinf"))
    assert not torch.allclose(roll, rlinf)
    # the style alone, with whitening off, changes nothing
    assert torch.equal(_advantages("algorithm.whiten_style=rlinf")[0], plain)
