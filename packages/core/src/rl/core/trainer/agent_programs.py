"""Rollouts played by agent programs (`rollout.multi_turn.agent`): for each prompt row and
each of its `n` samples, a session of the OpenAI-compatible endpoint in front of the
rollout role, and one run of the program against it. Each session's recording (token in /
token out: `rl.core.agent.session`) becomes the row, the program's outcome its answer.

Each session keeps to one replica of the rollout role (its prefix cached there), its
requests batched with the others waiting on that replica; the endpoint lives for the
step. A program that failed keeps what was recorded before it failed (or an empty, masked
row when nothing was) and scores 0; the reasons are shown once each and counted
(`agent/failed`, `agent/crashed`, `agent/timed_out`, `agent/over_budget`), and the failed
share is bounded as failed rewards are (`reward.max_error_rate`).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from typing import TYPE_CHECKING, Any

from rl.core.engines import Rollouts, SamplingParams
from rl.core.errors import ConfigError

if TYPE_CHECKING:
    from rl.core.trainer.context import RunContext


def sandbox_of(asked: str) -> str:
    """The boundary commands run in (`agent.sandbox`)."""
    from rl.core.agent.sandbox_boundary import why_not

    if asked == "none":
        return asked
    candidates = ["bwrap", "unshare"] if asked == "auto" else [asked]
    for boundary in candidates:
        if not why_not(boundary):
            return boundary
    reasons = "; ".join(f"{b}: {why_not(b)}" for b in candidates)
    raise ConfigError(
        f"rollout.multi_turn.agent.sandbox = {asked!r}: no OS boundary works here ({reasons}); "
        "install bubblewrap, or set rollout.multi_turn.agent.sandbox=none to run the agent "
        "program without one (it then reaches what the trainer's user reaches)"
    )


def load_function(spec: str) -> Any:
    """`path/to/file.py:name` or `package.module:name`."""
    import importlib

    from rl.core.config.paths import python_file
    from rl.core.imports import load_user_file

    where, _, name = spec.rpartition(":")
    if not where or not name:
        raise ConfigError(
            f"rollout.multi_turn.agent.function = {spec!r}: give path/to/file.py:name or "
            "package.module:name"
        )
    if where.endswith(".py"):
        module = load_user_file(python_file(where), "rl_agent_program", "agent.function")
    else:
        module = importlib.import_module(where)
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ConfigError(f"rollout.multi_turn.agent.function: {where} has no function {name!r}")
    return fn


def resolved(words: list[str]) -> list[str]:
    """A command's words with those naming files here made absolute: the program runs in
    a fresh folder of its own."""
    return [os.path.abspath(word) if os.path.isfile(word) else word for word in words]


def task_of(item: Any) -> dict[str, Any]:
    """What a program is given for a row: its prompt (the chat messages, or the text), its
    data source and its extra_info; not its answer."""
    task: dict[str, Any] = {"data_source": item.data_source, "extra_info": item.extra_info}
    if item.chat is not None:
        task["messages"] = item.chat
    else:
        task["prompt"] = item.prompt_text
    return task


def generate_with_programs(
    ctx: RunContext, items: list[Any], sampling: SamplingParams
) -> tuple[Rollouts, dict[str, float]]:
    from rl.core.trainer.agentic import run_coroutine
    from rl.core.workers.agent_endpoint import AgentEndpoint, SessionLimits

    config = ctx.config
    multi_turn, agent = config.rollout.multi_turn, config.rollout.multi_turn.agent
    response = config.data.max_response_length
    total = min(multi_turn.max_total_tokens or response, response)
    limits = SessionLimits(
        total, multi_turn.max_tokens_per_turn or total, multi_turn.max_assistant_turns
    )
    context = config.rollout.max_model_len or (
        config.data.max_prompt_length + config.data.max_response_length
    )

    async def generate(prompts: list[list[int]], turn: SamplingParams) -> Rollouts:
        return await asyncio.to_thread(ctx.rollout.generate, prompts, turn)

    role = ctx.rollout
    endpoint = AgentEndpoint(
        generate,
        ctx.tokenizer,
        [str(config.model.path), "policy"],
        sampling,
        limits,
        context,
        # each session on one replica of the rollout role, where its prefix is cached
        route=getattr(role, "generate_on", None),
        replicas=getattr(role, "replicas", 1),
    )
    with tempfile.TemporaryDirectory(prefix="rl-endpoint-") as folder:
        boundary = "none" if agent.function else sandbox_of(agent.sandbox)
        endpoint.start(os.path.join(folder, "endpoint.sock"))
        try:
            played = run_coroutine(_play_all(endpoint, items, sampling.n, agent, boundary))
        finally:
            endpoint.close()
    _bound_failures(ctx.agent_failures, items, sampling.n, played)
    return _rollouts(items, sampling.n, played, ctx.tokenizer.eos_token_id)


def _bound_failures(tracker: Any, items: list[Any], n: int, played: list[tuple[Any, Any]]) -> None:
    """Each failure shown once and the failed share bounded, as failed rewards are: a run
    whose programs keep failing stops (RewardError naming reward.max_error_rate) rather than
    train on their zeros."""
    from rl.core.rewards.types import ERROR, OK, TIMEOUT, RewardRequest, ScoreOutcome

    requests, outcomes = [], []
    for index, (outcome, session) in enumerate(played):
        item = items[index // n]
        requests.append(RewardRequest(item.data_source, outcome.answer or "", None))
        if outcome.ok and not session.stats.over_budget:
            outcomes.append(ScoreOutcome(0.0, OK, {}))
            continue
        why = outcome.error if not outcome.ok else "spent its session's budget"
        status = TIMEOUT if outcome.status == "timed_out" else ERROR
        outcomes.append(ScoreOutcome(0.0, status, {}, f"the agent program {why}"))
    tracker.record(requests, outcomes)


async def _play_all(
    endpoint: Any, items: list[Any], n: int, agent: Any, boundary: str
) -> list[tuple[Any, Any]]:
    from rl.core.agent.program import Sandbox, run_command, run_function

    gate = asyncio.Semaphore(agent.concurrency)
    function = load_function(agent.function) if agent.function else None
    sandbox = Sandbox(boundary, endpoint.unix_path)
    words = resolved(agent.words)

    async def play(item: Any) -> tuple[Any, Any]:
        async with gate:
            sid, base_url = endpoint.open()
            task = task_of(item)
            if function is not None:
                outcome = await run_function(function, task, base_url, agent.timeout_s)
            else:
                outcome = await run_command(words, task, base_url, sandbox, agent.timeout_s)
            return outcome, endpoint.close_session(sid)

    return list(await asyncio.gather(*(play(item) for item in items for _ in range(n))))


def _rollouts(
    items: list[Any], n: int, played: list[tuple[Any, Any]], eos: int
) -> tuple[Rollouts, dict[str, float]]:
    rows = Rollouts([], [], [], [], loss_masks=[], answers=[], answer_rewards=[])
    counts = {"failed": 0, "crashed": 0, "timed_out": 0, "over_budget": 0}
    edits = unrecorded = overridden = turns = requests = 0
    for index, (outcome, session) in enumerate(played):
        recording, stats = session.trajectory, session.stats
        if recording is not None and recording.turns:
            rows.prompt_ids.append(recording.prompt_ids)
            rows.response_ids.append(recording.response_ids)
            rows.logprobs.append(recording.logprobs)
            rows.loss_masks.append(recording.loss_mask)
            cut = recording.finish_reason == "length" or stats.over_budget
            turns += recording.turns
        else:  # nothing recorded: an empty row, out of the loss
            rows.prompt_ids.append(list(items[index // n].prompt_ids))
            rows.response_ids.append([eos])
            rows.logprobs.append([0.0])
            rows.loss_masks.append([0])
            cut = False
        rows.finish_reasons.append("length" if cut else "stop")
        good = outcome.ok and not stats.over_budget
        rows.answers.append(outcome.answer if good else None)
        rows.answer_rewards.append(outcome.reward if good else None)
        if not good:
            counts["failed"] += 1
            counts["over_budget"] += stats.over_budget
            counts["crashed"] += outcome.status == "crashed"
            counts["timed_out"] += outcome.status == "timed_out"
        edits += stats.history_edits
        unrecorded += stats.unrecorded_turns
        overridden += stats.sampling_overridden
        requests += stats.requests
    sessions = max(len(played), 1)
    metrics = {f"agent/{key}": float(value) for key, value in counts.items()}
    metrics.update(
        {
            "agent/sessions": float(len(played)),
            "agent/turns_mean": turns / sessions,
            "agent/requests_mean": requests / sessions,
            "agent/history_edits": float(edits),
            "agent/unrecorded_turns": float(unrecorded),
            "agent/sampling_overridden": float(overridden),
        }
    )
    return rows, metrics
