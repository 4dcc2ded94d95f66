"""The OpenAI-compatible endpoint in front of a real engine (rl's HF engine on a real-shape
Qwen2.5 folder whose answer is known: `judge_folder`), called with OpenAI's own client. The
prompt tokens are checked against the folder's chat template, the answer's tokens and
log-probs against the engine called directly, and concurrent requests against the number
of engine calls they made."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.request

import openai
import pytest

from rl.core.config import load_config
from rl.core.config.judge import JudgeConfig
from rl.core.engines import SamplingParams
from rl.core.models.loading import load_tokenizer
from rl.core.workers.judge_server import judge_run_config, start_judge
from rl.core.workers.openai_server import OpenAIServer

QUESTION = [{"role": "user", "content": "Is 2+2 4?"}]


class Counted:
    """The engine's batched call, counted."""

    def __init__(self, generate):
        self.generate, self.calls, self.rows = generate, 0, []

    async def __call__(self, prompts, sampling):
        self.calls += 1
        self.rows.append(len(prompts) * sampling.n)
        return await self.generate(prompts, sampling)


@pytest.fixture(scope="module")
def served(judge_folder):
    path = str(judge_folder(" yes"))
    run = load_config(None, [])
    judge = JudgeConfig(model_path=path, max_model_len=256)
    tokenizer = load_tokenizer(judge_run_config(run, judge).model)
    model = start_judge(run, judge)
    counted = Counted(model.agenerate)
    server = OpenAIServer(counted, tokenizer, [path, "judge"], max_model_len=256, timeout_s=120)
    server.start()
    yield server, model, tokenizer, counted
    server.close()
    model.close()


def client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="none", max_retries=0)


def test_a_chat_completion_is_the_engine_s_answer_to_the_chat_template_s_tokens(served):
    server, model, tokenizer, _ = served
    answer = client(server).chat.completions.create(
        model="judge",
        messages=QUESTION,
        max_tokens=3,
        temperature=0,
        logprobs=True,
        extra_body={"return_token_ids": True},
    )
    prompt = tokenizer.apply_chat_template(QUESTION, add_generation_prompt=True, tokenize=True)
    prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
    direct = model.engine.rollouts([prompt], SamplingParams(temperature=0, max_new_tokens=3))
    choice = answer.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == " yes yes yes" == tokenizer.decode(direct.response_ids[0])
    assert choice.finish_reason == "length"
    assert answer.model_extra["prompt_token_ids"] == prompt
    assert choice.model_extra["token_ids"] == direct.response_ids[0]
    assert [t.logprob for t in choice.logprobs.content] == pytest.approx(direct.logprobs[0])
    assert [t.token for t in choice.logprobs.content] == [" yes"] * 3
    assert answer.usage.prompt_tokens == len(prompt)
    assert answer.usage.completion_tokens == 3
    assert answer.usage.total_tokens == len(prompt) + 3


def test_a_stream_carries_the_same_answer_in_chunks(served):
    server, *_ = served
    chat = client(server).chat.completions
    whole = chat.create(model="judge", messages=QUESTION, max_tokens=2, temperature=0)
    chunks = list(
        chat.create(model="judge", messages=QUESTION, max_tokens=2, temperature=0, stream=True)
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == "length"
    assert chunks[-1].usage.completion_tokens == 2


def test_text_completions_take_text_or_token_ids_and_n_samples(served):
    server, _, tokenizer, _ = served
    completions = client(server).completions
    text = completions.create(model="judge", prompt="Say it:", max_tokens=2, n=3, temperature=0)
    assert [c.text for c in text.choices] == [" yes yes"] * 3
    assert [c.index for c in text.choices] == [0, 1, 2]
    ids = tokenizer("Say it:")["input_ids"]
    by_ids = completions.create(model="judge", prompt=ids, max_tokens=2, temperature=0)
    assert by_ids.usage.prompt_tokens == len(ids)
    assert by_ids.choices[0].text == " yes yes"


def test_requests_that_wait_together_share_an_engine_call(served):
    server, _, _, counted = served

    async def ask_all():
        remote = openai.AsyncOpenAI(base_url=server.base_url, api_key="none", max_retries=0)
        asks = [
            remote.chat.completions.create(
                model="judge",
                messages=[{"role": "user", "content": f"Question {i}?"}],
                max_tokens=1 + i % 3,
                temperature=0,
            )
            for i in range(12)
        ]
        return await asyncio.gather(*asks)

    before = counted.calls
    answers = asyncio.run(ask_all())
    assert [a.choices[0].message.content for a in answers] == [
        " yes" * (1 + i % 3) for i in range(12)
    ]
    assert [a.choices[0].finish_reason for a in answers] == ["length"] * 12
    calls = counted.calls - before
    assert calls < 12, f"12 concurrent requests made {calls} engine calls"
    assert max(counted.rows[before:]) > 1


def test_what_the_engines_cannot_do_is_refused_by_name(served):
    server, *_ = served
    chat = client(server).chat.completions
    with pytest.raises(openai.NotFoundError, match="gpt-4o"):
        chat.create(model="gpt-4o", messages=QUESTION)
    with pytest.raises(openai.BadRequestError, match="stop strings"):
        chat.create(model="judge", messages=QUESTION, stop=["\n"])
    with pytest.raises(openai.BadRequestError, match="max_tokens = 1000"):
        chat.create(model="judge", messages=QUESTION, max_tokens=1000)
    with pytest.raises(openai.BadRequestError, match="messages"):
        chat.create(model="judge", messages=[])
    with pytest.raises(openai.BadRequestError, match="image_url"):
        chat.create(
            model="judge",
            messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}],
        )


def test_models_and_health(served):
    server, *_ = served
    listed = client(server).models.list()
    assert [m.id for m in listed.data][1:] == ["judge"]
    with urllib.request.urlopen(f"http://{server.address}/health") as reply:
        assert reply.status == 200
    request = urllib.request.Request(
        server.base_url + "/chat/completions", data=b"{not json", method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request)
    assert refused.value.code == 400
    assert "not JSON" in json.loads(refused.value.read())["error"]["message"]


def test_closing_at_once_after_start_ends_the_thread_without_an_error(monkeypatch):
    """`close` right after `start` (a run refused after its endpoint came up) may clear
    the loop before the serving thread reaches `run_forever`: the thread must still end
    cleanly, not raise on the cleared attribute."""
    raised = []
    monkeypatch.setattr(threading, "excepthook", raised.append)

    async def generate(prompts, sampling):
        raise AssertionError("not called")

    for _ in range(30):
        server = OpenAIServer(generate, None, ["m"], max_model_len=8)
        server.start()
        thread = server.thread
        server.close()
        thread.join(timeout=15)
        assert not thread.is_alive()
    assert raised == []
