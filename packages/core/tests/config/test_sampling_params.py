"""SamplingParams refuses what no engine can sample with (the schema names config keys first;
this guards engines built in code)."""

import pytest

from rl.core.engines import SamplingParams


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n": 0}, "n = 0; allowed: >= 1"),
        ({"temperature": -1.0}, "temperature = -1.0; allowed: >= 0"),
        ({"top_p": 0.0}, r"top_p = 0.0; allowed: in \(0, 1\]"),
        ({"top_k": -2}, r"top_k = -2; allowed: -1 or 0 \(off\) or >= 1"),
        ({"max_new_tokens": 0}, "max_new_tokens = 0; allowed: >= 1"),
        ({"min_new_tokens": -1}, "min_new_tokens = -1; allowed: >= 0"),
        ({"min_new_tokens": 9, "max_new_tokens": 8}, r"min_new_tokens = 9; allowed: <= max_new"),
    ],
)
def test_bad_sampling_params(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SamplingParams(**kwargs)


def test_top_k_off_either_way():
    assert SamplingParams(top_k=0).top_k == 0 and SamplingParams(top_k=-1).top_k == -1
