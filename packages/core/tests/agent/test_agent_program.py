"""Agent programs run against their session's endpoint: real Python programs written with
OpenAI's client, run in the sandbox's OS boundary (bwrap here) with the endpoint relayed
onto their loopback. A program that answers is recorded; one that crashes, hangs or floods
the endpoint is a failed sample with its reason; and a program reaches nothing but the
endpoint (a server on the host's own loopback is out of its reach)."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
import time

import pytest

from rl.core.agent.program import CRASHED, OK, TIMED_OUT, Sandbox, run_command, run_function
from rl.core.agent.sandbox_boundary import why_not
from rl.core.config import load_config
from rl.core.config.judge import JudgeConfig
from rl.core.engines import SamplingParams
from rl.core.models.loading import load_tokenizer
from rl.core.workers.agent_endpoint import AgentEndpoint, SessionLimits
from rl.core.workers.judge_server import judge_run_config, start_judge

HEADER = """
import json, os, sys
from openai import OpenAI
task = json.load(sys.stdin)
client = OpenAI(max_retries=0)
"""
ANSWERS = (
    HEADER
    + """
reply = client.chat.completions.create(
    model="policy", messages=[{"role": "user", "content": task["question"]}]
)
print("thinking...")
print(json.dumps({"answer": reply.choices[0].message.content.strip() + "!"}))
"""
)
CRASHES = HEADER + "raise RuntimeError('the agent broke')\n"
HANGS = "import time\ntime.sleep(600)\n"
FLOODS = (
    HEADER
    + """
messages = [{"role": "user", "content": "Go."}]
while True:
    reply = client.chat.completions.create(model="policy", messages=messages)
    messages += [reply.choices[0].message.model_dump(), {"role": "user", "content": "Again."}]
"""
)
REACHES_OUT = (
    HEADER
    + """
import socket
try:
    socket.create_connection(("127.0.0.1", int(task["port"])), timeout=2).close()
    reached = "reached"
except OSError:
    reached = "blocked"
reply = client.chat.completions.create(model="policy", messages=[{"role": "user", "content": "x"}])
print(json.dumps({"answer": reached, "reward": 1.0}))
"""
)

pytestmark = pytest.mark.skipif(bool(why_not("bwrap")), reason="bwrap does not work here")


@pytest.fixture(scope="module")
def endpoint(judge_folder, tmp_path_factory):
    path = str(judge_folder(" yes", then_stop=True))
    run = load_config(None, [])
    judge = JudgeConfig(model_path=path, max_model_len=512)
    tokenizer = load_tokenizer(judge_run_config(run, judge).model)
    model = start_judge(run, judge)
    server = AgentEndpoint(
        model.agenerate,
        tokenizer,
        [path, "policy"],
        SamplingParams(temperature=1.0),
        SessionLimits(max_total_tokens=64, max_tokens_per_turn=8, max_turns=3),
        max_model_len=512,
    )
    server.start(str(tmp_path_factory.mktemp("endpoint") / "endpoint.sock"))
    yield server
    server.close()
    model.close()


def run(endpoint, tmp_path, program, task, timeout_s=60.0, boundary="bwrap"):
    script = tmp_path / "agent.py"
    script.write_text(program)
    sid, base_url = endpoint.open()
    sandbox = Sandbox(boundary, endpoint.unix_path)
    outcome = asyncio.run(
        run_command([sys.executable, str(script)], task, base_url, sandbox, timeout_s)
    )
    return outcome, endpoint.close_session(sid)


@pytest.mark.parametrize("boundary", ["bwrap", "unshare"])
def test_an_agent_in_the_sandbox_talks_to_its_session(endpoint, tmp_path, boundary):
    if why_not(boundary):
        pytest.skip(why_not(boundary))
    outcome, session = run(endpoint, tmp_path, ANSWERS, {"question": "Yes?"}, boundary=boundary)
    assert outcome.status == OK, outcome.error
    assert outcome.answer == "yes!" and outcome.reward is None
    assert session.trajectory.turns == 1 and session.stats.requests == 1


def test_an_agent_reaches_nothing_but_the_endpoint(endpoint, tmp_path):
    host = socket.socket()
    host.bind(("127.0.0.1", 0))
    host.listen()
    threading.Thread(target=lambda: host.accept(), daemon=True).start()
    port = host.getsockname()[1]
    outcome, session = run(endpoint, tmp_path, REACHES_OUT, {"port": port})
    assert outcome.status == OK, outcome.error
    assert (outcome.answer, outcome.reward) == ("blocked", 1.0)
    assert session.trajectory.turns == 1  # the endpoint itself was reached
    # the same program outside any boundary does reach the host's server
    outcome, _ = run(endpoint, tmp_path, REACHES_OUT, {"port": port}, boundary="none")
    assert outcome.answer == "reached"
    host.close()


def test_a_crashing_agent_is_a_failed_sample_with_its_reason(endpoint, tmp_path):
    outcome, _ = run(endpoint, tmp_path, CRASHES, {})
    assert outcome.status == CRASHED
    assert "exited with status 1" in outcome.error and "the agent broke" in outcome.error


def test_a_hanging_agent_is_killed_at_its_time(endpoint, tmp_path):
    started = time.monotonic()
    outcome, _ = run(endpoint, tmp_path, HANGS, {}, timeout_s=2.0)
    assert outcome.status == TIMED_OUT and "2 s" in outcome.error
    assert time.monotonic() - started < 30


def test_a_flooding_agent_is_stopped_by_its_budget(endpoint, tmp_path):
    outcome, session = run(endpoint, tmp_path, FLOODS, {})
    assert outcome.status == CRASHED and "3 answers" in outcome.error
    assert session.stats.over_budget and session.trajectory.turns == 3


def test_a_function_agent_and_its_failures(endpoint):
    import openai

    def agent(task, base_url, api_key):
        client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
        reply = client.chat.completions.create(
            model="policy", messages=[{"role": "user", "content": task}]
        )
        return {"answer": reply.choices[0].message.content, "reward": 0.5}

    sid, base_url = endpoint.open()
    outcome = asyncio.run(run_function(agent, "Yes?", base_url, 60.0))
    assert (outcome.status, outcome.answer, outcome.reward) == (OK, " yes", 0.5)
    assert endpoint.close_session(sid).trajectory.turns == 1

    def broken(task, base_url, api_key):
        raise KeyError("missing")

    outcome = asyncio.run(run_function(broken, {}, base_url, 5.0))
    assert outcome.status == CRASHED and "KeyError" in outcome.error
    outcome = asyncio.run(run_function(lambda *_: time.sleep(30), {}, base_url, 0.5))
    assert outcome.status == TIMED_OUT
