"""Partial rollouts on a real engine (Hugging Face generation, a tiny random Qwen2):
generated in pieces, a response equals the one generated in one go; and when new weights
land between two pieces, the response goes on from exactly its tokens so far, each token
carrying the policy version that sampled it and that policy's log-prob (checked against a
teacher-forced forward of the finished row under each version's weights)."""

from __future__ import annotations

import contextlib

import pytest
import torch

from rl.core.config.schema import TinyModelConfig
from rl.core.engines import SamplingParams
from rl.core.models.tiny import build_char_tokenizer, tiny_qwen2_config
from rl.core.trainer.partial import Interruptible, generate_in_pieces, version_metrics
from rl.rollout.hf import HFRolloutEngine


def model(tokenizer, seed):
    from transformers import Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = tiny_qwen2_config(
        TinyModelConfig(), len(tokenizer), tokenizer.pad_token_id, tokenizer.eos_token_id
    )
    return Qwen2ForCausalLM(config).eval()


@pytest.fixture(scope="module")
def setup():
    tokenizer = build_char_tokenizer()
    prompts = [tokenizer.encode(text) for text in ("7*8-5=", "12+3=", "abc")]
    return tokenizer, prompts


class Pushes:
    """Plays the pipeline: the engine's weights become `later` before piece `at`."""

    def __init__(self, engine, later=None, at=None):
        self.engine, self.later, self.at = engine, later, at
        self.pieces, self.current = 0, 0

    @contextlib.contextmanager
    def hold(self):
        if self.later is not None and self.pieces == self.at:
            self.engine.update_weights(iter(self.later.state_dict().items()))
            self.current = 1
        self.pieces += 1
        yield


def teacher_forced(net, prompt, response):
    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        logits = net(ids).logits[0, len(prompt) - 1 : -1].float()
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(response)[:, None])[:, 0]


def test_pieces_give_the_responses_of_one_go(setup):
    tokenizer, prompts = setup
    engine = HFRolloutEngine(model(tokenizer, 0), tokenizer)
    greedy = SamplingParams(n=2, temperature=0.0, max_new_tokens=20, ignore_eos=True)
    whole = engine.generate(prompts, greedy)
    pushes = Pushes(engine)
    pieces = generate_in_pieces(engine, prompts, greedy, Interruptible(pushes.hold, lambda: 0, 6))
    assert pushes.pieces == 4  # 6 + 6 + 6 + 2 tokens
    assert pieces.response_ids == whole.response_ids
    assert pieces.prompt_ids == [p for p in prompts for _ in range(2)]
    for mine, theirs in zip(pieces.logprobs, whole.logprobs, strict=True):
        assert torch.allclose(torch.tensor(mine), torch.tensor(theirs), atol=1e-5)
    assert pieces.policy_versions == [[0] * 20] * 6


def test_a_push_between_pieces_continues_the_response_under_the_new_weights(setup):
    tokenizer, prompts = setup
    old, new = model(tokenizer, 0), model(tokenizer, 1)
    engine = HFRolloutEngine(model(tokenizer, 0), tokenizer)
    pushes = Pushes(engine, later=new, at=1)
    sampling = SamplingParams(n=2, temperature=1.0, max_new_tokens=16, ignore_eos=True)
    control = Interruptible(pushes.hold, lambda: pushes.current, 5)
    out = generate_in_pieces(engine, prompts, sampling, control)
    for prompt, response, logprobs, versions in zip(
        out.prompt_ids, out.response_ids, out.logprobs, out.policy_versions, strict=True
    ):
        assert versions == [0] * 5 + [1] * 11
        expected = torch.cat(
            [teacher_forced(old, prompt, response)[:5], teacher_forced(new, prompt, response)[5:]]
        )
        assert torch.allclose(torch.tensor(logprobs), expected, atol=1e-4)
    metrics = version_metrics(out, step=1)
    assert metrics["rollout/partial_rate"] == 1.0
    assert metrics["rollout/token_staleness_max"] == 1.0
    assert metrics["rollout/token_staleness_mean"] == pytest.approx(5 / 16)


def test_stopped_responses_leave_the_next_pieces(setup):
    tokenizer, prompts = setup
    engine = HFRolloutEngine(model(tokenizer, 0), tokenizer)
    digits = tuple(tokenizer.convert_tokens_to_ids(list("0123456789")))
    sampling = SamplingParams(n=4, max_new_tokens=30, stop_token_ids=digits, seed=None)
    torch.manual_seed(5)
    out = generate_in_pieces(
        engine, prompts, sampling, Interruptible(contextlib.nullcontext, lambda: 0, 4)
    )
    for ids, reason in zip(out.response_ids, out.finish_reasons, strict=True):
        stopped = ids[-1] in (*digits, tokenizer.eos_token_id)
        assert reason == ("stop" if stopped else "length")
        assert stopped or len(ids) == 30
        assert not any(t in (*digits, tokenizer.eos_token_id) for t in ids[:-1])
