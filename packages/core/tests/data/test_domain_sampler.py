"""`data.domain_interleave_probs`: ROLL's fixed split of each batch over domains
(`int(p * size)` for all but the last domain, which takes the rest: ROLL's rlvr_pipeline),
each domain walking its own prompts, resumable exactly."""

from __future__ import annotations

import pytest

from rl.core.data.domain_sampler import DomainSampler, domain_batch_sizes
from rl.core.errors import ConfigError

ROLL_PROBS = {
    "math_rule": 0.4,
    "code_sandbox": 0.3,
    "llm_judge": 0.1,
    "crossthinkqa": 0.1,
    "ifeval": 0.1,
}


def test_the_split_is_rolls():
    # ROLL's example: 64 prompts -> 25, 19, 6, 6 and the rest, 8
    assert domain_batch_sizes(ROLL_PROBS, 64) == {
        "math_rule": 25,
        "code_sandbox": 19,
        "llm_judge": 6,
        "crossthinkqa": 6,
        "ifeval": 8,
    }
    assert domain_batch_sizes({"a": 0.1, "b": 0.9}, 4) == {"a": 0, "b": 4}


def domains_of(counts):
    return [name for name, count in counts.items() for _ in range(count)]


def test_every_batch_holds_each_domains_share_drawn_from_its_own_prompts():
    domains = domains_of(
        {
            "math_rule": 60,
            "code_sandbox": 40,
            "llm_judge": 10,
            "crossthinkqa": 12,
            "ifeval": 9,
            "other": 5,
        }
    )
    sampler = DomainSampler(domains, ROLL_PROBS, 16, seed=3)
    sizes = domain_batch_sizes(ROLL_PROBS, 16)
    seen = {name: set() for name in ROLL_PROBS}
    for _ in range(12):
        batch = sampler.next_batch()
        assert len(batch) == 16
        got = [domains[i] for i in batch]
        assert got == [name for name, size in sizes.items() for _ in range(size)]
        for i in batch:
            seen[domains[i]].add(i)
    assert len(seen["llm_judge"]) == 10  # a small domain cycles through all its prompts
    assert all(domains[i] != "other" for batch in [sampler.next_batch()] for i in batch)


def test_a_resumed_sampler_draws_what_an_uninterrupted_one_draws():
    domains = domains_of({"a": 30, "b": 11})
    whole = DomainSampler(domains, {"a": 0.5, "b": 0.5}, 8, seed=1)
    first = DomainSampler(domains, {"a": 0.5, "b": 0.5}, 8, seed=1)
    expected = [whole.next_batch() for _ in range(9)]
    got = [first.next_batch() for _ in range(4)]
    resumed = DomainSampler(domains, {"a": 0.5, "b": 0.5}, 8, seed=1)
    resumed.load_state_dict(first.state_dict())
    got += [resumed.next_batch() for _ in range(5)]
    assert got == expected
    assert whole.steps_per_epoch == 7  # every domain seen whole: a has 30 prompts in 4s


def test_refusals_name_the_key():
    domains = domains_of({"a": 30, "b": 2})
    with pytest.raises(ConfigError, match=r"domain 'b' has 2 prompts .* fewer than the 4"):
        DomainSampler(domains, {"a": 0.5, "b": 0.5}, 8)
    with pytest.raises(ConfigError, match=r"share more than the whole batch"):
        DomainSampler(domains, {"a": 0.9, "b": 0.9, "c": 0.1}, 8)
    sampler = DomainSampler(domains, {"a": 1.0}, 8)
    with pytest.raises(ConfigError, match=r"from one mixed sampler, this run from \['a'\]"):
        sampler.load_state_dict({"epoch": 0, "position": 1})
