"""Per-prompt sampling seeds: a pure function of the run's seeds, the step and the prompt's
place; shares of a call keep their prompts' seeds."""

import pytest

from rl.core.engines import SEED_LIMIT, SamplingParams
from rl.core.rng import prompt_seeds


def test_seeds_are_a_pure_function_of_the_key_and_the_place():
    seeds = prompt_seeds(1, 0, "train", 3, count=64)
    assert seeds == prompt_seeds(1, 0, "train", 3, count=64)
    assert prompt_seeds(1, 0, "train", 3, count=8) == seeds[:8]  # a prefix: place alone decides
    assert len(set(seeds)) == 64
    for other in (
        prompt_seeds(2, 0, "train", 3, count=64),
        prompt_seeds(1, 0, "train", 4, count=64),
        prompt_seeds(1, 0, "val", 3, count=64),
        prompt_seeds(1, 1, "train", 3, count=64),
    ):
        assert not set(other) & set(seeds)
    assert all(0 <= s < 2**62 for s in seeds)
    SamplingParams(n=1024, prompt_seeds=seeds)  # seed + j stays a valid 64-bit seed


def test_shares_keep_their_prompts_seeds():
    sampling = SamplingParams(n=2, prompt_seeds=(10, 20, 30))
    assert sampling.sample_seeds(3) == [10, 11, 20, 21, 30, 31]
    assert sampling.for_prompts([2, 0]).sample_seeds(2) == [30, 31, 10, 11]
    assert SamplingParams(n=2).for_prompts([1]).sample_seeds(1) is None
    with pytest.raises(ValueError, match="3 seeds for 2 prompts"):
        sampling.sample_seeds(2)
    with pytest.raises(ValueError, match="prompt_seeds"):
        SamplingParams(n=4, prompt_seeds=(SEED_LIMIT - 2,))
