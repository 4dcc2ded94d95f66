"""The agent loop's bookkeeping on scripted model turns (`ScriptedEngine` plays the model's
samples, as a rollout engine would return them): the trajectory's ids are exactly the chat
template's rendering of the whole conversation (token in / token out), the loss mask covers
the model's tokens and nothing else, budgets and turn limits truncate, and failing tools
become counted error messages."""

from __future__ import annotations

import asyncio
import threading

import pytest

from rl.core.agent.environment import GuessNumber
from rl.core.agent.loop import AgentLimits, AgentLoop, trajectory_metrics
from rl.core.agent.tools import Calculator
from rl.core.engines import Rollouts, SamplingParams


class ScriptedEngine:
    """Returns the next scripted turn (text + <eos>, or cut at the budget) per call, with
    made-up log-probs; records what it was asked to continue."""

    def __init__(self, tokenizer, turns):
        self.tokenizer, self.turns, self.seen = tokenizer, list(turns), []

    async def generate_one(self, prompt_ids, sampling):
        self.seen.append(list(prompt_ids))
        ids = [*self.tokenizer.encode(self.turns.pop(0)), self.tokenizer.eos_token_id]
        reason = "stop"
        if len(ids) > sampling.max_new_tokens:
            ids, reason = ids[: sampling.max_new_tokens], "length"
        logprobs = [-0.01 * (i + 1) for i in range(len(ids))]
        return Rollouts([list(prompt_ids)], [ids], [logprobs], [reason])


def call(expression):
    return (
        '<tool_call>{"name": "calculator", "arguments": {"expression": "'
        + expression
        + '"}}</tool_call>'
    )


def run(loop, prompt, **kwargs):
    return asyncio.run(loop.run(prompt, SamplingParams(max_new_tokens=64), **kwargs))


def test_a_trajectory_is_the_rendered_conversation_token_for_token(tokenizer):
    turns = [call("3*4"), call("12+5"), "the answer is 17"]
    engine = ScriptedEngine(tokenizer, turns)
    loop = AgentLoop(engine, tokenizer, [Calculator()])
    prompt = loop.chat.prompt_ids([{"role": "user", "content": "3*4+5?"}])
    trajectory = run(loop, prompt)
    conversation = [
        {"role": "user", "content": "3*4+5?"},
        {"role": "assistant", "content": turns[0]},
        {"role": "tool", "content": "12"},
        {"role": "assistant", "content": turns[1]},
        {"role": "tool", "content": "17"},
        {"role": "assistant", "content": turns[2]},
    ]
    rendered = tokenizer.apply_chat_template(conversation, tools=loop.chat.tools, tokenize=False)
    assert trajectory.ids == tokenizer.encode(rendered)  # the reference: one rendering
    # the model saw exactly the trajectory so far before each of its turns
    model_starts = [
        i
        for i, m in enumerate(trajectory.loss_mask)
        if m and (i == 0 or not trajectory.loss_mask[i - 1])
    ]
    assert [len(seen) for seen in engine.seen] == [len(prompt) + s for s in model_starts]
    # the loss mask covers each assistant turn's text and its <eos>, nothing else
    model_text = tokenizer.decode(
        [t for t, m in zip(trajectory.response_ids, trajectory.loss_mask, strict=True) if m]
    )
    assert model_text == "".join(turn + "<eos>" for turn in turns)
    assert all(
        lp == 0.0 for lp, m in zip(trajectory.logprobs, trajectory.loss_mask, strict=True) if not m
    )
    assert (trajectory.turns, trajectory.tool_calls, trajectory.tool_errors) == (3, 2, 0)
    assert not trajectory.truncated and trajectory.finish_reason == "stop"


@pytest.mark.timeout(120)  # liveness: a loop that waited for the hanging tool would hang here
def test_failing_hanging_and_unknown_tools_become_counted_errors(tokenizer):
    release, returned = threading.Event(), threading.Event()

    class Hangs:
        name, description, parameters = "sleepy", "never returns", {"type": "object"}

        def call(self, arguments):
            release.wait(600)  # until the test lets it go
            returned.set()

    class Raises:
        name, description, parameters = "broken", "always fails", {"type": "object"}

        def call(self, arguments):
            raise RuntimeError("boom")

    turns = [
        '<tool_call>{"name": "sleepy", "arguments": {}}</tool_call>'
        '<tool_call>{"name": "broken", "arguments": {}}</tool_call>'
        '<tool_call>{"name": "nope", "arguments": {}}</tool_call>'
        + call("1/0")
        + "<tool_call>garbage</tool_call>",
        "done",
    ]
    loop = AgentLoop(
        ScriptedEngine(tokenizer, turns),
        tokenizer,
        [Calculator(), Hangs(), Raises()],
        limits=AgentLimits(tool_timeout_s=0.5, max_tokens_per_turn=1024, max_total_tokens=4096),
    )
    try:
        trajectory = run(loop, loop.chat.prompt_ids([{"role": "user", "content": "go"}]))
        # the loop went on while the tool still hung: its timeout fired, nothing waited
        assert not returned.is_set()
    finally:
        release.set()
    outside = tokenizer.decode(
        [t for t, m in zip(trajectory.response_ids, trajectory.loss_mask, strict=True) if not m]
    )
    for message in (
        "error: tool call is not JSON",
        "error: sleepy timed out after 0.5 s",
        "error: broken failed (RuntimeError: boom)",
        "error: no tool named 'nope'",
        "error: division by zero",
    ):
        assert message in outside
    assert (trajectory.tool_calls, trajectory.tool_errors, trajectory.turns) == (5, 5, 2)


@pytest.mark.parametrize(
    ("limits", "turns", "reason"),
    [
        (AgentLimits(max_turns=2), [call("1+1"), call("2+2"), "x"], "max_turns"),
        (AgentLimits(max_tokens_per_turn=10), ["a" * 50], "length"),
        (AgentLimits(max_total_tokens=80), [call("1+1"), call("2+2"), "x"], "total"),
    ],
)
def test_budgets_truncate(tokenizer, limits, turns, reason):
    loop = AgentLoop(ScriptedEngine(tokenizer, turns), tokenizer, [Calculator()], limits=limits)
    trajectory = run(loop, loop.chat.prompt_ids([{"role": "user", "content": "q"}]))
    assert trajectory.truncated
    assert len(trajectory.response_ids) <= limits.max_total_tokens
    if reason == "length":
        assert trajectory.finish_reason == "length" and trajectory.model_token_count() == 10
    if reason == "max_turns":
        assert trajectory.turns == 2


def test_an_environment_episode_with_rewards_per_step(tokenizer):
    loop = AgentLoop(ScriptedEngine(tokenizer, ["5", "2", "3"]), tokenizer)
    trajectory = run(loop, [], environment=GuessNumber(0, 9), task=3)
    assert trajectory.rewards == [0.0, 0.0, 1.0]
    rendered = tokenizer.apply_chat_template(
        [
            {"role": "user", "content": "guess a number from 0 to 9"},
            {"role": "assistant", "content": "5"},
            {"role": "user", "content": "lower"},
            {"role": "assistant", "content": "2"},
            {"role": "user", "content": "higher"},
            {"role": "assistant", "content": "3"},
        ],
        tokenize=False,
    )
    assert trajectory.ids == tokenizer.encode(rendered)
    assert trajectory.turns == 3 and not trajectory.truncated


def test_many_trajectories_in_flight_and_their_metrics(tokenizer):
    class Echo:
        """Each request's answer depends only on its own prompt: order cannot mix them."""

        async def generate_one(self, prompt_ids, sampling):
            await asyncio.sleep(0.01 * (len(prompt_ids) % 3))
            ids = [*prompt_ids[-2:], tokenizer.eos_token_id]
            return Rollouts([list(prompt_ids)], [ids], [[-1.0] * 3], ["stop"])

    loop = AgentLoop(Echo(), tokenizer, [Calculator()])
    prompts = [tokenizer.encode(f"p{i}") for i in range(6)]
    trajectories = asyncio.run(loop.run_many(prompts, SamplingParams(n=2), concurrency=4))
    assert len(trajectories) == 12
    for index, trajectory in enumerate(trajectories):
        assert trajectory.prompt_ids == prompts[index // 2]
        assert trajectory.response_ids[:2] == prompts[index // 2][-2:]
    metrics = trajectory_metrics(trajectories)
    assert metrics["agent/turns_mean"] == 1.0 and metrics["agent/tool_errors"] == 0.0
