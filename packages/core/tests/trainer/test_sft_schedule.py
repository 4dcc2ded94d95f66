"""rl's SFT as verl's SFT trainer runs it: epochs of shuffled rows without replacement (the
partial batch dropped), the step count that follows, prompt + answer cut to max_length as
verl's SFT dataset cuts their concatenation, and the optimizer settings it trains with."""

from __future__ import annotations

import pytest

from rl.core.config import ConfigError, load_config
from rl.core.trainer.sft import fit_length, sft_optim, sft_rows, sft_steps


def _config(*overrides: str):
    return load_config(None, list(overrides))


def test_epochs_are_shuffled_passes_without_replacement_dropping_the_partial_batch():
    config = _config("sft.batch_size=4", "sft.epochs=3")
    assert sft_steps(config, 10) == 3 * (10 // 4)
    batches = sft_rows(config, 10)
    for _ in range(3):  # each epoch: 2 batches, 8 distinct rows of 10
        epoch = next(batches) + next(batches)
        assert len(set(epoch)) == 8 and set(epoch) <= set(range(10))
    # `steps` caps the epochs (verl's total_training_steps)
    assert sft_steps(_config("sft.batch_size=4", "sft.epochs=3", "sft.steps=5"), 10) == 5
    with pytest.raises(ConfigError, match="sft.batch_size = 4 is more than the 3 rows"):
        sft_steps(config, 3)


def test_without_epochs_rows_are_drawn_at_random_for_sft_steps():
    config = _config("sft.batch_size=4", "sft.steps=7")
    assert sft_steps(config, 10) == 7
    draws = sft_rows(config, 10)
    assert all(len(next(draws)) == 4 for _ in range(7))


def test_max_length_cuts_prompt_and_answer_together_as_verl():
    prompt, answer, mask = [1, 2, 3, 4], [5, 6, 7], [1, 1, 1]
    assert fit_length(prompt, answer, mask, 7, "error", 0) == (prompt, answer, mask)
    # right: the first 5 tokens of the concatenation
    assert fit_length(prompt, answer, mask, 5, "right", 0) == ([1, 2, 3, 4], [5], [1])
    assert fit_length(prompt, answer, mask, 3, "right", 0) == ([1, 2, 3], [], [])
    # left: the last 5
    assert fit_length(prompt, answer, mask, 5, "left", 0) == ([3, 4], [5, 6, 7], [1, 1, 1])
    assert fit_length(prompt, answer, mask, 2, "left", 0) == ([], [6, 7], [1, 1])
    with pytest.raises(ConfigError, match="data row 9: prompt \\+ answer are 7 tokens"):
        fit_length(prompt, answer, mask, 5, "error", 9)


def test_the_sft_optimizer_takes_the_sft_section():
    optim = sft_optim(
        _config(
            "sft.lr=0.01",
            "sft.weight_decay=0.1",
            "sft.betas=[0.8,0.9]",
            "sft.lr_scheduler=cosine",
            "sft.lr_warmup_ratio=0.2",
            "actor.optim.grad_clip=0.5",
        )
    )
    assert (optim.lr, optim.weight_decay, optim.betas) == (0.01, 0.1, (0.8, 0.9))
    assert (optim.lr_scheduler, optim.lr_warmup_ratio, optim.grad_clip) == ("cosine", 0.2, 0.5)
