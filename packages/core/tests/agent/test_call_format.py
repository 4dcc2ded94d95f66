"""The `call` tool-call format (`name(argument)`, for vocabularies without quotes or braces)
and the agent loop running it with the tiny demo tokenizer's chat template: a trajectory
is still the template's rendering of the whole conversation, token for token."""

from __future__ import annotations

import asyncio

import pytest

from rl.core.agent.loop import AgentLoop
from rl.core.agent.parser import CallParser, ToolCall
from rl.core.agent.tools import Calculator, PythonRunner
from rl.core.engines import Rollouts, SamplingParams
from rl.core.models.tiny import build_char_tokenizer


def parser():
    return CallParser.for_tools([Calculator(), PythonRunner()])


@pytest.mark.parametrize(
    ("text", "calls", "errors"),
    [
        ("calculator(7*8-5)", [ToolCall("calculator", {"expression": "7*8-5"})], 0),
        (" calculator((2+3)*4) ", [ToolCall("calculator", {"expression": "(2+3)*4"})], 0),
        ("python(print(1))", [ToolCall("python", {"code": "print(1)"})], 0),
        ("calculator(7*8", [], 1),  # opened, never closed: the model is told
        ("51", [], 0),  # the final answer
        ("calculator(7)51", [], 1),  # text after the call: not one call
        ("sqrt(4)", [], 0),  # not a tool: text like any other
        ("the answer is 4", [], 0),
    ],
)
def test_a_turn_is_one_call_or_the_answer(text, calls, errors):
    turn = parser().parse(text)
    assert turn.calls == calls
    assert len(turn.errors) == errors


def test_tools_of_several_arguments_cannot_use_the_call_format():
    two = Calculator(name="two", parameters={"required": ["a", "b"]})
    with pytest.raises(ValueError, match="'two' takes 2 required arguments"):
        CallParser.for_tools([two])


class Scripted:
    def __init__(self, tokenizer, turns):
        self.tokenizer, self.turns = tokenizer, list(turns)

    async def generate_one(self, prompt_ids, sampling):
        ids = [*self.tokenizer.encode(self.turns.pop(0)), self.tokenizer.eos_token_id]
        return Rollouts([list(prompt_ids)], [ids], [[-0.5] * len(ids)], ["stop"])


def test_the_demo_tokenizer_renders_a_calculator_episode_token_for_token():
    tokenizer = build_char_tokenizer()
    engine = Scripted(tokenizer, ["calculator(7*8-5)", "51"])
    tools = [Calculator()]
    loop = AgentLoop(engine, tokenizer, tools, CallParser.for_tools(tools))
    prompt = tokenizer.encode("7*8-5=")
    trajectory = asyncio.run(loop.run(prompt, SamplingParams(max_new_tokens=20)))
    conversation = [
        {"role": "user", "content": "7*8-5="},
        {"role": "assistant", "content": "calculator(7*8-5)"},
        {"role": "tool", "content": "51"},
        {"role": "assistant", "content": "51"},
    ]
    rendered = tokenizer.apply_chat_template(conversation, tokenize=False)
    assert rendered == "7*8-5=calculator(7*8-5)<eos>#51#51<eos>"
    assert trajectory.ids == tokenizer.encode(rendered)
    model = [int(keep) for keep in trajectory.loss_mask]
    assert model == [1] * 18 + [0] * 4 + [1] * 3
    assert trajectory.tool_calls == 1 and trajectory.tool_errors == 0
