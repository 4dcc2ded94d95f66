"""verl's tool config read into rl's tools, and verl's multi-turn options in the agent loop
(scripted model turns, as in test_agent_loop.py). The GSM8K tool's replies are what
verl's `Gsm8kTool.execute` returns for the same answer and ground truth (read from its
code: the answer prefixed with `#### ` unless it is, GSM8K's flexible reading, the text
`Current parsed answer='...' reward=...`)."""

from __future__ import annotations

import asyncio
import textwrap

import pytest

from rl.core.agent.loop import AgentLimits, AgentLoop, truncated
from rl.core.agent.tools import PythonRunner
from rl.core.agent.verl_tools import Gsm8kAnswer, load_tools
from rl.core.engines import SamplingParams
from rl.core.errors import ConfigError
from rl.core.rewards.gsm8k_rule import gsm8k

from .test_agent_loop import ScriptedEngine

CONFIG = """
tools:
  - class_name: "verl.tools.gsm8k_tool.Gsm8kTool"
    config:
      type: native
    tool_schema:
      type: "function"
      function:
        name: "calc_gsm8k_reward"
        description: "A tool for calculating the reward of gsm8k."
        parameters:
          type: "object"
          properties:
            answer:
              type: "string"
              description: "The model's answer"
          required: ["answer"]
  - class_name: "verl.tools.sandbox_fusion_tools.SandboxFusionTool"
    config:
      sandbox_fusion_url: "https://example.invalid/run_code"
      default_timeout: 5
      memory_limit_mb: 256
      type: native
    tool_schema:
      type: "function"
      function:
        name: "code_interpreter"
        description: "A tool for executing code."
        parameters:
          type: "object"
          properties:
            code:
              type: "string"
          required: ["code"]
"""


@pytest.fixture
def tools(tmp_path):
    path = tmp_path / "tool_config.yaml"
    path.write_text(CONFIG)
    return load_tools(str(path), gsm8k)


def test_verls_classes_become_rl_tools_under_their_schemas(tools):
    gsm8k, code = tools
    assert isinstance(gsm8k, Gsm8kAnswer) and gsm8k.name == "calc_gsm8k_reward"
    assert gsm8k.parameters["required"] == ["answer"]
    assert isinstance(code, PythonRunner) and code.name == "code_interpreter"
    assert code.limits.timeout_s == 5 and code.limits.memory_mb == 256
    assert code.call({"code": "print(6 * 7)"}).strip() == "42"


@pytest.mark.parametrize(
    ("answer", "truth", "reply"),
    [
        ("72", "72", "Current parsed answer='72' reward=1.0"),
        ("#### 72", "72", "Current parsed answer='#### 72' reward=1.0"),
        ("71", "72", "Current parsed answer='71' reward=0.0"),
        (
            "The total is 72 dollars",
            "72",
            "Current parsed answer='The total is 72 dollars' reward=1.0",
        ),
        (72, "72", "Current parsed answer='72' reward=1.0"),  # verl makes it a string
        ("none", "72", "Current parsed answer='none' reward=0.0"),
    ],
)
def test_the_gsm8k_tool_replies_as_verls(tools, answer, truth, reply):
    assert tools[0].call({"answer": answer}, {"ground_truth": truth}) == reply


def call(name, **arguments):
    import json

    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def test_the_row_s_create_kwargs_reach_the_tool_and_parallel_calls_are_capped(tokenizer, tools):
    turns = [
        call("calc_gsm8k_reward", answer="71") + call("calc_gsm8k_reward", answer="72"),
        "done",
    ]
    limits = AgentLimits(max_parallel_calls=1, max_tokens_per_turn=200, max_total_tokens=600)
    loop = AgentLoop(ScriptedEngine(tokenizer, turns), tokenizer, tools, limits=limits)
    prompt = loop.chat.prompt_ids([{"role": "user", "content": "q"}])
    row = {"calc_gsm8k_reward": {"create_kwargs": {"ground_truth": "71"}}}
    trajectory = asyncio.run(loop.run(prompt, SamplingParams(max_new_tokens=200), tools_kwargs=row))
    text = tokenizer.decode(trajectory.response_ids)
    # verl runs the first max_parallel_calls calls and answers only those
    assert text.count("tool:") == 1
    assert "tool:Current parsed answer='71' reward=1.0<eos>" in text
    assert trajectory.tool_calls == 1 and trajectory.tool_errors == 0
    # a row without its ground truth: the tool says so, counted as the tool's error
    loop = AgentLoop(ScriptedEngine(tokenizer, turns), tokenizer, tools, limits=limits)
    trajectory = asyncio.run(loop.run(prompt, SamplingParams(max_new_tokens=200)))
    assert trajectory.tool_errors == 1
    assert "create_kwargs.ground_truth" in tokenizer.decode(trajectory.response_ids)


def test_tool_responses_are_cut_as_verl_cuts_them():
    text = "abcdefghij"
    assert truncated(text, 4, "left") == "(truncated)...ghij"
    assert truncated(text, 4, "right") == "abcd...(truncated)"
    assert truncated(text, 4, "middle") == "ab...(truncated)...ij"
    assert truncated(text, 10, "middle") == text


def test_a_tool_class_rl_lacks_is_refused_by_name(tmp_path):
    path = tmp_path / "tools.yaml"
    path.write_text(
        textwrap.dedent(
            """
            tools:
              - class_name: "verl.tools.search_tool.SearchTool"
                config: {}
                tool_schema: {type: function, function: {name: search, parameters: {}}}
            """
        )
    )
    with pytest.raises(ConfigError, match=r"tools\[0\].*verl.tools.search_tool.SearchTool"):
        load_tools(str(path), gsm8k)
    with pytest.raises(ConfigError, match="cannot read it"):
        load_tools(str(tmp_path / "missing.yaml"), gsm8k)
