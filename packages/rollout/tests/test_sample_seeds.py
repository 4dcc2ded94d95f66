"""Per-sample seeds (`SamplingParams.prompt_seeds`): a sample depends on its own seed alone,
not on the prompts it shares a call (a replica, a chunk) with."""

import pytest
import torch

from rl.core.config import load_config
from rl.core.engines import SamplingParams
from rl.core.models import load_tokenizer
from rl.rollout.hf import HFRolloutEngine
from rl.rollout.hf_sampling import RowDraws, inverse_cdf


@pytest.fixture(scope="module")
def setup():
    config = load_config(overrides=["rollout.load_format=auto"])  # the weights read
    tokenizer = load_tokenizer(config.model)
    return tokenizer, HFRolloutEngine.from_config(config, tokenizer)


def seeded(seeds, **kwargs):
    return SamplingParams(n=3, temperature=1.0, max_new_tokens=8, prompt_seeds=seeds, **kwargs)


def test_a_prompts_samples_do_not_depend_on_its_neighbours_or_chunks(setup):
    tokenizer, engine = setup
    prompts = [tokenizer(t).input_ids for t in ("12+7=", "3-1=", "5*5=", "8+80=")]
    seeds = (11, 22_000, 3, 2**61)
    together = engine.generate(prompts, seeded(seeds))
    torch.manual_seed(123)  # the global stream is not what they draw from
    engine.max_batch_size = 3  # one prompt (its 3 samples) per chunk
    try:
        alone = engine.generate(prompts[2:][::-1], seeded(seeds[2:][::-1]))
    finally:
        engine.max_batch_size = 256
    # prompt 2 and 3 came back in reverse order: rows 0-2 answer prompt 3, rows 3-5 prompt 2
    assert alone.response_ids[3:6] == together.response_ids[6:9]
    assert alone.response_ids[0:3] == together.response_ids[9:12]
    for a, b in zip(alone.logprobs[3:6], together.logprobs[6:9], strict=True):
        assert torch.allclose(torch.tensor(a), torch.tensor(b), atol=1e-5)
    # and the seeds decide: other seeds, other samples; the n samples of a prompt differ
    other = engine.generate(prompts, seeded(tuple(s + 1000 for s in seeds)))
    assert other.response_ids != together.response_ids
    assert len({tuple(r) for r in together.response_ids[0:3]}) > 1


def test_seeds_must_match_the_prompts(setup):
    tokenizer, engine = setup
    with pytest.raises(ValueError, match="2 seeds for 1 prompts"):
        engine.generate([tokenizer("1=").input_ids], seeded((1, 2)))
    with pytest.raises(ValueError, match="prompt_seeds"):
        seeded((-1,))


def test_row_draws_sample_the_distribution():
    """Inverse-CDF draws against the probabilities themselves: 20,000 rows, each its own
    seed, drawing from one distribution with zeros (a top-k cut) in it."""
    probs = torch.tensor([0.5, 0.0, 0.2, 0.3, 0.0])
    rows = 20_000
    draws = RowDraws(list(range(rows)), 1)
    tokens = draws.sample(probs.expand(rows, -1), 0)
    counts = torch.bincount(tokens, minlength=5).double() / rows
    assert counts[1] == 0 and counts[4] == 0
    # 4 standard errors of a binomial share
    assert torch.allclose(counts, probs.double(), atol=4 * (0.25 / rows) ** 0.5)
    # the same seeds draw the same tokens; a row's draw ignores the other rows
    again = RowDraws(list(range(rows)), 1).sample(probs.expand(rows, -1), 0)
    assert torch.equal(tokens, again)
    assert RowDraws([7], 1).sample(probs[None], 0).item() == tokens[7].item()


def test_row_draws_take_a_rows_stream_one_uniform_a_step():
    """The uniforms drawn up front are the ones a draw per step gives: step t of a row uses
    its generator's t-th number."""
    probs = torch.softmax(torch.randn(3, 50, generator=torch.Generator().manual_seed(0)), -1)
    draws = RowDraws([3, 4, 5], 4)
    generators = [torch.Generator().manual_seed(seed) for seed in (3, 4, 5)]
    for step in range(4):
        uniform = torch.cat([torch.rand(1, generator=g, dtype=torch.float64) for g in generators])
        assert torch.equal(draws.sample(probs, step), inverse_cdf(probs, uniform))


def _inverse_cdf_float64(probs, uniform):
    """The definition, in one level: the float64 running sum over the whole vocabulary."""
    cumulative = probs.double().cumsum(-1)
    threshold = uniform * cumulative[:, -1]
    token = torch.searchsorted(cumulative, threshold[:, None], right=True).squeeze(1)
    return token.clamp_(max=probs.shape[-1] - 1)


@pytest.mark.parametrize("vocab", [5, 1024, 3000, 151_936])
def test_the_two_level_search_draws_the_one_level_tokens(vocab):
    """Block totals, then a running sum inside one block (`inverse_cdf`), pick the token
    the float64 running sum over the whole vocabulary picks, zero-probability tokens
    (a top-k or top-p cut) included, never one of them. (The block totals are float32
    sums: u within float32 rounding of 1 may pick the last token of non-zero probability
    in another block's place, a difference of float32 rounding in the distribution.)"""
    generator = torch.Generator().manual_seed(vocab)
    for sharpness in (1.0, 4.0, 16.0):
        logits = torch.randn(32, vocab, generator=generator) * sharpness
        logits[::2, ::7] = -float("inf")
        probs = torch.softmax(logits, -1)
        uniform = torch.rand(32, generator=generator, dtype=torch.float64) * (1 - 1e-6)
        uniform[0] = 0.0
        tokens = inverse_cdf(probs, uniform)
        assert torch.equal(tokens, _inverse_cdf_float64(probs, uniform))
        assert (probs.gather(1, tokens[:, None]) > 0).all()
        last = inverse_cdf(probs, torch.full((32,), 1.0 - 2**-53, dtype=torch.float64))
        assert (probs.gather(1, last[:, None]) > 0).all()


def test_where_the_levels_round_apart_a_token_of_the_block_is_taken():
    """A threshold the block totals place in a block whose own running sum never passes
    it (the two summation orders rounded apart): its last token of non-zero probability."""
    probs = torch.tensor([[0.25, 0.25, 0.5, 0.0]])
    # the whole total is 1: u just below 1 falls in the second block ([0.5, 0.0]) by the
    # totals; inside it the running sum reaches 1.0 exactly, which passes any u < 1
    assert inverse_cdf(probs, torch.tensor([1.0 - 2**-53]), block=2).item() == 2
    # a threshold past every running sum (as rounding could make it) keeps to the block
    assert inverse_cdf(probs, torch.tensor([1.0]), block=2).item() == 2
