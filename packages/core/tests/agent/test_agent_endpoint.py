"""Agent sessions behind the OpenAI-compatible endpoint, token in / token out: an agent
written with OpenAI's own client talks to rl's HF engine over several turns (tool results
and user turns between the model's answers), and the session's recording is checked
against three independent things: the engine's own token ids for each answer (the
endpoint's `return_token_ids`), the chat template's rendering of the whole conversation,
and transformers' log-probs of the recorded tokens."""

from __future__ import annotations

from itertools import groupby

import openai
import pytest
import torch

from rl.core.agent.parser import HermesParser
from rl.core.agent.session import assistant_message, normalise
from rl.core.config import load_config
from rl.core.config.judge import JudgeConfig
from rl.core.engines import SamplingParams
from rl.core.models.loading import load_tokenizer
from rl.core.workers.agent_endpoint import AgentEndpoint, SessionLimits
from rl.core.workers.judge_server import judge_run_config, start_judge

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calculator",
            "description": "Evaluate arithmetic.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string"}},
                "required": ["expression"],
            },
        },
    }
]


@pytest.fixture(scope="module")
def policy(model_folder):
    """A real-shape Qwen2.5 folder with random weights: it answers at random, sampling at
    temperature 1 (a 2-layer, 128-wide copy: fast on the CPU)."""
    path = str(model_folder("qwen2.5-0.5b", num_layers=2, hidden_size=128, intermediate_size=256))
    run = load_config(None, [])
    judge = JudgeConfig(model_path=path, max_model_len=1024)
    tokenizer = load_tokenizer(judge_run_config(run, judge).model)
    model = start_judge(run, judge)
    yield path, model, tokenizer
    model.close()


@pytest.fixture
def endpoint(policy):
    path, model, tokenizer = policy
    server = AgentEndpoint(
        model.agenerate,
        tokenizer,
        [path, "policy"],
        SamplingParams(temperature=1.0, top_p=1.0),
        SessionLimits(max_total_tokens=200, max_tokens_per_turn=12, max_turns=4),
        max_model_len=1024,
    )
    server.start()
    yield server
    server.close()


def agent(base_url, turns):
    """An agent program: each turn echoes the assistant's message back, as clients do
    (`model_dump`), then adds a tool result or a user message. Returns the engine's
    token ids of each answer and the conversation."""
    client = openai.OpenAI(base_url=base_url, api_key="session", max_retries=0)
    messages = [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "What is 12*7?"},
    ]
    answers = []
    for turn in range(turns):
        reply = client.chat.completions.create(
            model="policy", messages=messages, tools=TOOLS, extra_body={"return_token_ids": True}
        )
        choice = reply.choices[0]
        answers.append(choice.model_extra["token_ids"])
        messages.append(choice.message.model_dump())
        if turn < turns - 1:
            messages.append(
                {"role": "tool", "tool_call_id": "call_0", "content": "84"}
                if turn % 2 == 0
                else {"role": "user", "content": "Go on."}
            )
    return answers, messages


def test_a_multi_turn_session_records_exactly_what_the_engine_generated(policy, endpoint):
    path, _, tokenizer = policy
    sid, base_url = endpoint.open()
    answers, messages = agent(base_url, turns=3)
    session = endpoint.close_session(sid)
    recording = session.trajectory
    assert session.stats.history_edits == 0 and session.stats.requests == 3
    # the prompt: the first request through the chat template, its tools described
    first = tokenizer.apply_chat_template(messages[:2], tools=TOOLS, add_generation_prompt=True)
    assert recording.prompt_ids == list(first["input_ids"] if hasattr(first, "keys") else first)
    # the model's tokens: each answer's, as the engine sampled them, in order
    pairs = zip(recording.response_ids, recording.loss_mask, strict=True)
    runs = [(keep, [t for t, _ in run]) for keep, run in groupby(pairs, key=lambda p: p[1])]
    assert [run for keep, run in runs if keep] == answers
    assert [keep for keep, _ in runs] == [1, 0, 1, 0, 1]  # answer, tool, answer, user, answer
    # the outside tokens: the template's, so the whole decodes to the template's text of the
    # conversation (each answer closed by the end-of-turn token the model or the session put)
    texts = [tokenizer.decode(ids, skip_special_tokens=False) for ids in answers]
    conversation = [dict(m) for m in messages]
    for index, text in zip([2, 4, 6], texts, strict=True):
        conversation[index] = {"role": "assistant", "content": text.removesuffix("<|im_end|>")}
    rendered = tokenizer.apply_chat_template(
        conversation[:-1], tools=TOOLS, add_generation_prompt=True, tokenize=False
    )
    whole = tokenizer.decode(recording.prompt_ids + recording.response_ids)
    assert whole == rendered + texts[-1]
    # the log-probs: transformers' on the recorded tokens, at the model's positions
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    ids = torch.tensor([recording.prompt_ids + recording.response_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, len(recording.prompt_ids) - 1 : -1]
    expected = torch.log_softmax(logits, -1).gather(1, ids[0, len(recording.prompt_ids) :, None])
    mask = torch.tensor(recording.loss_mask, dtype=torch.bool)
    got = torch.tensor(recording.logprobs)
    assert torch.allclose(got[mask], expected[:, 0][mask], atol=1e-4)
    assert (got[~mask] == 0).all()


def test_an_edited_history_stops_the_recording_and_is_counted(policy, endpoint):
    sid, base_url = endpoint.open()
    client = openai.OpenAI(base_url=base_url, api_key="session", max_retries=0)
    messages = [{"role": "user", "content": "Hello?"}]
    first = client.chat.completions.create(model="policy", messages=messages)
    recorded = len(endpoint.sessions[sid].trajectory.response_ids)
    # the agent rewrites the model's answer before going on
    edited = [*messages, {"role": "assistant", "content": "Something else."}]
    edited.append({"role": "user", "content": "And?"})
    second = client.chat.completions.create(model="policy", messages=edited)
    assert second.choices[0].message.role == "assistant"
    session = endpoint.close_session(sid)
    assert session.stats.history_edits == 1 and session.stats.unrecorded_turns == 1
    assert len(session.trajectory.response_ids) == recorded  # nothing after the edit
    assert session.trajectory.turns == 1 and first.choices[0].message.role == "assistant"


def test_requests_outside_a_live_session_are_refused(endpoint):
    sid, base_url = endpoint.open()
    endpoint.close_session(sid)
    for url in (base_url, f"http://{endpoint.address}/v1"):
        client = openai.OpenAI(base_url=url, api_key="session", max_retries=0)
        with pytest.raises(openai.NotFoundError, match="no live agent session"):
            client.chat.completions.create(
                model="policy", messages=[{"role": "user", "content": "x"}]
            )


def test_a_session_past_its_turns_is_refused_and_sampling_is_the_run_s(endpoint):
    sid, base_url = endpoint.open()
    client = openai.OpenAI(base_url=base_url, api_key="session", max_retries=0)
    messages = [{"role": "user", "content": "Count."}]
    for _ in range(4):
        reply = client.chat.completions.create(model="policy", messages=messages, temperature=0)
        messages += [reply.choices[0].message.model_dump(), {"role": "user", "content": "More."}]
    with pytest.raises(openai.BadRequestError, match="4 answers"):
        client.chat.completions.create(model="policy", messages=messages)
    session = endpoint.close_session(sid)
    assert session.stats.over_budget
    assert session.stats.sampling_overridden == 4  # temperature 0 asked, the run's 1 used
    with pytest.raises(openai.BadRequestError, match="n must be 1"):
        sid, base_url = endpoint.open()
        openai.OpenAI(base_url=base_url, api_key="s", max_retries=0).chat.completions.create(
            model="policy", messages=messages[:1], n=2
        )


def test_tool_calls_in_the_model_s_text_become_openai_tool_calls():
    text = 'Let me compute.\n<tool_call>\n{"name": "calculator", "arguments": {"expression": "12*7"}}\n</tool_call>'
    message = assistant_message(text, HermesParser())
    assert message["content"] == "Let me compute."
    assert message["tool_calls"] == [
        {
            "id": "call_0",
            "type": "function",
            "function": {"name": "calculator", "arguments": '{"expression": "12*7"}'},
        }
    ]
    # what a client echoes back (its extra fields, arguments re-serialised) is the same turn
    echoed = {
        **message,
        "refusal": None,
        "audio": None,
        "tool_calls": [
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": "calculator", "arguments": '{"expression":"12*7"}'},
            }
        ],
    }
    assert normalise(echoed) == normalise(message)
    assert normalise({**message, "content": "Let me compute!"}) != normalise(message)


def test_each_session_keeps_to_one_replica(policy):
    """Two replicas (two engines on the folder): every request of a session goes to the
    replica its session was dealt, the sessions spread over both."""
    path, model, tokenizer = policy
    run = load_config(None, [])
    second = start_judge(run, JudgeConfig(model_path=path, max_model_len=1024))
    replicas, seen = [model, second], []

    async def route(replica, prompt, sampling):
        seen.append((replica, len(prompt)))
        return await replicas[replica].agenerate([prompt], sampling)

    server = AgentEndpoint(
        model.agenerate,
        tokenizer,
        ["policy"],
        SamplingParams(temperature=1.0),
        SessionLimits(max_total_tokens=200, max_tokens_per_turn=4, max_turns=4),
        max_model_len=1024,
        route=route,
        replicas=2,
    )
    server.start()
    try:
        by_session = {}
        for _ in range(4):
            sid, base_url = server.open()
            before = len(seen)
            client = openai.OpenAI(base_url=base_url, api_key="s", max_retries=0)
            messages = [{"role": "user", "content": "Hi."}]
            for _ in range(2):
                reply = client.chat.completions.create(model="policy", messages=messages)
                messages += [
                    reply.choices[0].message.model_dump(),
                    {"role": "user", "content": "?"},
                ]
            by_session[sid] = {replica for replica, _ in seen[before:]}
            assert server.close_session(sid).trajectory.turns == 2
    finally:
        server.close()
        second.close()
    assert all(len(used) == 1 for used in by_session.values())  # one replica a session
    assert {replica for used in by_session.values() for replica in used} == {0, 1}


def test_text_completions_in_a_session_are_recorded_token_in_token_out(policy, endpoint):
    """An agent that keeps its own tokens (token ids in, `return_token_ids` out): each
    prompt is the recorded tokens plus its own; a prompt that drops a token is an edit."""
    _, _, tokenizer = policy
    sid, base_url = endpoint.open()
    client = openai.OpenAI(base_url=base_url, api_key="s", max_retries=0)
    prompt = tokenizer("Once upon a time")["input_ids"]
    first = client.completions.create(
        model="policy", prompt=prompt, max_tokens=5, extra_body={"return_token_ids": True}
    )
    said = first.choices[0].model_extra["token_ids"]
    assert first.choices[0].text == tokenizer.decode(said, skip_special_tokens=True)
    more = tokenizer(" and then")["input_ids"]
    second = client.completions.create(
        model="policy",
        prompt=prompt + said + more,
        max_tokens=5,
        extra_body={"return_token_ids": True},
    )
    said_again = second.choices[0].model_extra["token_ids"]
    recording = endpoint.sessions[sid].trajectory
    assert recording.prompt_ids == prompt
    assert recording.response_ids == said + more + said_again
    assert recording.loss_mask == [1] * len(said) + [0] * len(more) + [1] * len(said_again)
    # a prompt without the last answer's tokens: answered, not recorded
    client.completions.create(model="policy", prompt=prompt + more, max_tokens=3)
    session = endpoint.close_session(sid)
    assert session.stats.history_edits == 1 and session.trajectory.turns == 2


def test_a_streamed_session_answer_is_recorded_too(endpoint):
    sid, base_url = endpoint.open()
    client = openai.OpenAI(base_url=base_url, api_key="s", max_retries=0)
    chunks = list(
        client.chat.completions.create(
            model="policy", messages=[{"role": "user", "content": "Hi."}], stream=True
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    session = endpoint.close_session(sid)
    assert session.trajectory.turns == 1
    assert text == session.tokenizer.decode(
        session.trajectory.response_ids, skip_special_tokens=True
    )
