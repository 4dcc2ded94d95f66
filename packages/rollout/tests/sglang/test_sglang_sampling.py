"""SamplingParams -> SGLang sampling_params dicts: greedy, top-k conventions, stops, seeds, refusals."""

import pytest

from rl.core.engines import SamplingParams
from rl.rollout.sglang.sampling import (
    UnsupportedSamplingError,
    expand_prompts,
    request_params,
    row_params,
)

# The request-level fields of SGLang's SamplingParams, as read from its source
# (python/sglang/srt/sampling/sampling_params.py); any other key is an error inside SGLang.
SGLANG_SAMPLING_FIELDS = {
    "max_new_tokens", "stop", "stop_token_ids", "temperature", "top_p", "top_k", "min_p",
    "frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens", "n",
    "json_schema", "regex", "ebnf", "structural_tag", "ignore_eos", "skip_special_tokens",
    "spaces_between_special_tokens", "no_stop_trim", "custom_params", "stream_interval",
    "logit_bias", "sampling_seed",
}  # fmt: skip


def test_sampling_maps_field_by_field():
    params = SamplingParams(
        n=4, temperature=0.7, top_p=0.9, top_k=20, max_new_tokens=16, stop_token_ids=(5, 3)
    )
    assert request_params(params, eos_token_id=2) == {
        "n": 1,  # the engine expands prompts itself
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": 20,
        "max_new_tokens": 16,
        "stop_token_ids": [2, 3, 5],
        "ignore_eos": False,
    }


@pytest.mark.parametrize(("ours", "sglang"), [(-1, -1), (0, -1), (1, 1), (50, 50)])
def test_top_k_off_is_minus_one_for_sglang(ours, sglang):
    assert request_params(SamplingParams(top_k=ours), None)["top_k"] == sglang


def test_greedy_is_sglang_top_k_one_at_temperature_zero():
    params = request_params(SamplingParams(temperature=0.0, top_p=0.5, top_k=7), None)
    assert (params["temperature"], params["top_p"], params["top_k"]) == (0.0, 1.0, 1)


def test_eos_joins_the_stop_ids_once_and_none_is_skipped():
    assert request_params(SamplingParams(stop_token_ids=(2, 9)), 2)["stop_token_ids"] == [2, 9]
    assert request_params(SamplingParams(), None)["stop_token_ids"] == []


def test_ignore_eos_is_passed():
    assert request_params(SamplingParams(ignore_eos=True), 2)["ignore_eos"] is True


def test_rows_are_grouped_by_prompt_and_use_only_sglang_fields():
    params = SamplingParams(n=3, seed=None)
    rows = row_params(params, num_prompts=2, eos_token_id=2)
    assert len(rows) == 6 and all("sampling_seed" not in row for row in rows)
    assert all(set(row) <= SGLANG_SAMPLING_FIELDS for row in rows)
    assert expand_prompts([[1, 2], [3]], 3) == [[1, 2]] * 3 + [[3]] * 3


def test_seeded_rows_differ_within_a_group_and_repeat_across_calls():
    params = SamplingParams(n=2, seed=11)
    rows = row_params(params, num_prompts=2, eos_token_id=2)
    assert [row["sampling_seed"] for row in rows] == [11, 12, 13, 14]
    assert rows == row_params(params, num_prompts=2, eos_token_id=2)
    assert all(set(row) <= SGLANG_SAMPLING_FIELDS for row in rows)


def test_a_seed_beyond_63_bits_wraps():
    rows = row_params(SamplingParams(seed=(1 << 63) - 1), 1, None)
    assert rows[0]["sampling_seed"] == (1 << 63) - 1
    rows = row_params(SamplingParams(n=2, seed=(1 << 63) - 1), 1, None)
    assert rows[1]["sampling_seed"] == 0


@pytest.mark.parametrize(
    ("params", "seed_supported", "named"),
    [
        (SamplingParams(min_new_tokens=2), True, "min_new_tokens = 2"),
        (SamplingParams(repetition_penalty=1.1), True, "repetition_penalty = 1.1"),
        (SamplingParams(seed=3), False, "seed = 3"),
    ],
)
def test_settings_sglang_would_ignore_are_refused(params, seed_supported, named):
    with pytest.raises(UnsupportedSamplingError, match=named):
        row_params(params, 1, 2, seed_supported=seed_supported)
