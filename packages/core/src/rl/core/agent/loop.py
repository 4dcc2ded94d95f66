"""The agent loop: many trajectories in flight (asyncio), each a conversation between the
model (`RolloutEngine.generate_one`) and tools or an environment, token in / token out.

A model turn runs until the model ends it (EOS or a stop token, kept) or the turn's token
budget; its text is parsed for tool calls, each call runs in a worker thread under a
timeout, and the results come back as the chat template's tool turn (`ChatDelta`). With an
environment, the model's turn is the action and the observation comes back as a user turn.
A turn without tool calls ends the trajectory (the final answer); so do `max_turns`, the
total budget `max_total_tokens`, a turn cut by its length budget, or the environment saying
done. A tool that raises, hangs or returns non-text gives the model an error message and is
counted; it never ends the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rl.core.agent.chat import ChatDelta
from rl.core.agent.environment import Environment
from rl.core.agent.parser import HermesParser, ToolCall, ToolCallParser
from rl.core.agent.tools import Tool, ToolError, schema
from rl.core.agent.trajectory import Trajectory
from rl.core.engines import SamplingParams


@dataclass(frozen=True)
class AgentLimits:
    max_turns: int = 4  # model turns (verl: max_assistant_turns; ChatLearn: max_ai_message_turn)
    max_tokens_per_turn: int = 256  # ROLL: max_tokens_per_step
    max_total_tokens: int = 1024  # after the prompt (ChatLearn: max_total_token_length)
    tool_timeout_s: float = 10.0
    max_tool_output_chars: int = 2000  # verl: max_tool_response_length
    truncate_side: str = "right"  # verl: tool_response_truncate_side (left, middle, right)
    max_parallel_calls: int | None = None  # the first calls of a turn run; None: all


class AgentLoop:
    def __init__(
        self,
        engine: Any,
        tokenizer: Any,
        tools: Sequence[Tool] = (),
        parser: ToolCallParser | None = None,
        limits: AgentLimits | None = None,
    ) -> None:
        self.engine, self.tokenizer = engine, tokenizer
        self.tools = {tool.name: tool for tool in tools}
        self.parser = parser or HermesParser()
        self.limits = limits or AgentLimits()
        self.chat = ChatDelta(tokenizer, [schema(tool) for tool in tools])

    async def run(
        self,
        prompt_ids: Sequence[int],
        sampling: SamplingParams,
        environment: Environment | None = None,
        task: Any = None,
        tools_kwargs: Mapping[str, Any] | None = None,
    ) -> Trajectory:
        """One trajectory from `prompt_ids`. With an environment, it is reset on `task`
        first; empty `prompt_ids` then mean "the first observation is the prompt".
        `tools_kwargs`: the row's per-tool `create_kwargs` (verl's `extra_info.tools_kwargs`),
        handed to the tools that take them."""
        if environment is not None:
            first = environment.reset(task)
            if not prompt_ids:
                prompt_ids = self.chat.prompt_ids([{"role": "user", "content": first}])
        trajectory = Trajectory(list(prompt_ids))
        limits = self.limits
        while True:
            budget = min(
                limits.max_tokens_per_turn,
                limits.max_total_tokens - len(trajectory.response_ids),
            )
            if budget <= 0 or trajectory.turns >= limits.max_turns:
                trajectory.truncated = True
                return trajectory
            turn = replace(sampling, n=1, max_new_tokens=budget)
            out = await self.engine.generate_one(trajectory.ids, turn)
            ids, logprobs = list(out.response_ids[0]), list(out.logprobs[0])
            trajectory.add_model_turn(ids, logprobs)
            trajectory.finish_reason = out.finish_reasons[0] if out.finish_reasons else "stop"
            if trajectory.finish_reason == "length":
                trajectory.truncated = True
                return trajectory
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            if environment is not None:
                step = environment.step(text)
                trajectory.rewards.append(float(step.reward))
                if step.done:
                    return trajectory
                messages = [{"role": "user", "content": step.observation}]
            else:
                parsed = self.parser.parse(text)
                if not parsed.calls and not parsed.errors:
                    return trajectory  # the final answer
                if trajectory.turns >= limits.max_turns:  # no turn left to read the results
                    trajectory.truncated = True
                    return trajectory
                messages = await self._tool_messages(
                    parsed.calls, parsed.errors, trajectory, tools_kwargs or {}
                )
            outside = self.chat.turn_ids(messages)
            if len(trajectory.response_ids) + len(outside) > limits.max_total_tokens:
                trajectory.truncated = True
                return trajectory
            trajectory.add_outside_turn(outside)

    async def _tool_messages(
        self,
        calls: list[ToolCall],
        errors: list[str],
        trajectory: Trajectory,
        tools_kwargs: Mapping[str, Any],
    ) -> list[dict[str, Any]]:
        calls = calls[: self.limits.max_parallel_calls]  # verl drops the others unanswered
        trajectory.tool_calls += len(calls) + len(errors)
        trajectory.tool_errors += len(errors)
        messages = [{"role": "tool", "content": f"error: {error}"} for error in errors]
        results = await asyncio.gather(*(self._call(call, tools_kwargs) for call in calls))
        for ok, content in results:
            trajectory.tool_errors += not ok
            messages.append({"role": "tool", "content": content})
        return messages

    async def _call(self, call: ToolCall, tools_kwargs: Mapping[str, Any]) -> tuple[bool, str]:
        """(succeeded, what the model reads)."""
        tool = self.tools.get(call.name)
        if tool is None:
            known = ", ".join(sorted(self.tools)) or "none"
            return False, f"error: no tool named {call.name!r} (tools: {known})"
        arguments: tuple[Any, ...] = (call.arguments,)
        if getattr(tool, "takes_row", False):  # verl's create_kwargs of this row
            row = tools_kwargs.get(call.name) or {}
            arguments += (dict(row.get("create_kwargs") or {}),)
        try:
            result = await asyncio.wait_for(
                in_daemon_thread(tool.call, *arguments), self.limits.tool_timeout_s
            )
        except TimeoutError:
            return False, f"error: {call.name} timed out after {self.limits.tool_timeout_s} s"
        except ToolError as error:
            return False, f"error: {error}"
        except Exception as error:  # a broken tool is the model's problem to route around
            return False, f"error: {call.name} failed ({type(error).__name__}: {error})"
        if not isinstance(result, str):
            try:
                result = json.dumps(result)
            except (TypeError, ValueError):
                return False, f"error: {call.name} returned {type(result).__name__}, not text"
        return True, truncated(result, self.limits.max_tool_output_chars, self.limits.truncate_side)

    async def run_many(
        self,
        prompts: Sequence[Sequence[int]],
        sampling: SamplingParams,
        environments: Sequence[Environment] | None = None,
        tasks: Sequence[Any] | None = None,
        concurrency: int = 256,
        tools_kwargs: Sequence[Mapping[str, Any]] | None = None,
    ) -> list[Trajectory]:
        """`sampling.n` trajectories per prompt (prompt-major), `concurrency` in flight;
        `tools_kwargs`, one per prompt."""
        gate = asyncio.Semaphore(concurrency)
        jobs = []
        for index, prompt in enumerate(prompts):
            for copy in range(sampling.n):
                env = environments[index * sampling.n + copy] if environments else None
                task = tasks[index] if tasks else None
                row = tools_kwargs[index] if tools_kwargs else None
                jobs.append((prompt, env, task, row))

        async def one(
            prompt: Sequence[int], env: Environment | None, task: Any, row: Any
        ) -> Trajectory:
            async with gate:
                return await self.run(prompt, sampling, env, task, row)

        return list(await asyncio.gather(*(one(*job) for job in jobs)))


def truncated(text: str, limit: int, side: str) -> str:
    """`text` cut to `limit` characters as verl's tool agent loop cuts a tool's response:
    `left` keeps its end, `right` its start, `middle` both halves."""
    if len(text) <= limit:
        return text
    if side == "left":
        return "(truncated)..." + text[-limit:]
    if side == "right":
        return text[:limit] + "...(truncated)"
    half = limit // 2
    return text[:half] + "...(truncated)..." + text[-half:]


async def in_daemon_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` in a daemon thread: a call that never returns is abandoned at its
    timeout and holds up neither the event loop's shutdown nor the interpreter's exit
    (a thread cannot be killed; tools that may hang, like code execution, should run in
    a subprocess of their own, as `PythonRunner` does)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():  # timed out (cancelled) meanwhile
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def target() -> None:
        try:
            value, error = fn(*args), None
        except BaseException as caught:  # handed to the awaiting coroutine
            value, error = None, caught
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=target, daemon=True, name="rl-agent-tool").start()
    return await future


def trajectory_metrics(trajectories: Sequence[Trajectory]) -> Mapping[str, float]:
    """Per-step means: turns, tool calls and errors, truncation, model tokens."""
    count = max(len(trajectories), 1)
    return {
        "agent/turns_mean": sum(t.turns for t in trajectories) / count,
        "agent/tool_calls_mean": sum(t.tool_calls for t in trajectories) / count,
        "agent/tool_errors": float(sum(t.tool_errors for t in trajectories)),
        "agent/truncated_rate": sum(t.truncated for t in trajectories) / count,
        "agent/model_tokens_mean": sum(t.model_token_count() for t in trajectories) / count,
    }
