"""SGLang output dicts (token-in/token-out, return_logprob) -> Rollouts."""

import pytest

from rl.rollout.sglang.outputs import SGLangOutputError, parse_output, to_rollouts


def sglang_output(ids, logprobs, finish, output_ids=None):
    """An output shaped as SGLang's Engine.generate returns it with skip_tokenizer_init."""
    return {
        "output_ids": list(ids) if output_ids is None else output_ids,
        "meta_info": {
            "id": "b2c4",
            "finish_reason": finish,
            "prompt_tokens": 5,
            "completion_tokens": len(ids),
            "cached_tokens": 0,
            "e2e_latency": 0.01,
            "output_token_logprobs": [(lp, t, None) for lp, t in zip(logprobs, ids, strict=True)],
        },
    }


STOP = {"type": "stop", "matched": 2}
LENGTH = {"type": "length", "length": 3}


def test_stop_keeps_the_stop_token_and_its_logprob():
    ids, logprobs, reason = parse_output(sglang_output([7, 8, 2], [-0.5, -1.25, -0.1], STOP))
    assert (ids, logprobs, reason) == ([7, 8, 2], [-0.5, -1.25, -0.1], "stop")


def test_length_finish():
    assert parse_output(sglang_output([7, 8, 9], [-1.0] * 3, LENGTH))[2] == "length"


def test_output_ids_without_the_matched_stop_token_is_accepted():
    output = sglang_output([7, 2], [-0.5, -0.1], STOP, output_ids=[7])
    assert parse_output(output)[0] == [7, 2]


def test_output_ids_that_disagree_raise():
    with pytest.raises(SGLangOutputError, match="disagree"):
        parse_output(sglang_output([7, 8], [-0.5, -0.1], LENGTH, output_ids=[7, 9]))
    with pytest.raises(SGLangOutputError, match="disagree"):  # trimming only for "stop"
        parse_output(sglang_output([7, 8], [-0.5, -0.1], LENGTH, output_ids=[7]))


def test_abort_raises_with_sglang_message():
    finish = {"type": "abort", "message": "prompt longer than context_length"}
    with pytest.raises(SGLangOutputError, match="context_length"):
        parse_output(sglang_output([], [], finish))


def test_missing_logprobs_raise():
    output = sglang_output([7], [-0.5], LENGTH)
    del output["meta_info"]["output_token_logprobs"]
    with pytest.raises(SGLangOutputError, match="output_token_logprobs"):
        parse_output(output)


def test_rows_keep_their_prompts_and_order():
    prompts = [[1, 2], [1, 2], [3], [3]]
    outputs = [
        sglang_output([4, 2], [-0.1, -0.2], STOP),
        sglang_output([5, 5, 5], [-0.3, -0.4, -0.5], LENGTH),
        sglang_output([2], [-0.6], STOP),
        sglang_output([6, 2], [-0.7, -0.8], STOP),
    ]
    rollouts = to_rollouts(prompts, outputs)
    assert rollouts.prompt_ids == prompts
    assert rollouts.response_ids == [[4, 2], [5, 5, 5], [2], [6, 2]]
    assert rollouts.logprobs[1] == [-0.3, -0.4, -0.5]
    assert rollouts.finish_reasons == ["stop", "length", "stop", "stop"]
    assert all(isinstance(lp, float) for row in rollouts.logprobs for lp in row)


def test_a_missing_output_raises():
    with pytest.raises(SGLangOutputError, match="1 SGLang outputs for 2 requests"):
        to_rollouts([[1], [2]], [sglang_output([2], [-0.1], STOP)])
