"""Agentic rollouts in the RL step (`rollout.multi_turn.enable`): the agent loop
(`rl.core.agent`) runs on the driver over the rollout role's `generate_one`, many
trajectories in flight, with tools or with an environment per trajectory, and its
trajectories become `Rollouts` whose loss masks keep the tool / environment turns out of
the loss (and, with an environment, whose `returns` are the episodes' summed step
rewards). Without multi-turn, generation is the engine's batched call."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from rl.core.config import Config
from rl.core.engines import Rollouts, SamplingParams
from rl.core.errors import ConfigError

if TYPE_CHECKING:
    from rl.core.trainer.context import RunContext

T = TypeVar("T")

# Outcome-reward estimators: one score at the last model token; GAE would need values at
# the tool tokens it skips, and ReMax's greedy baseline a greedy agent run.
ESTIMATORS = ("grpo", "rloo", "reinforce_plus_plus", "reinforce_plus_plus_baseline")


def check(config: Config) -> None:
    """What multi-turn rollouts need from the rest of the config (ConfigError otherwise)."""
    agent = config.rollout.multi_turn.agent
    if agent.enabled and not config.rollout.multi_turn.enable:
        raise ConfigError(
            "rollout.multi_turn.agent is set but rollout.multi_turn.enable is false: set it "
            "true to train the agent program (or unset the agent)"
        )
    if not config.rollout.multi_turn.enable:
        return
    if agent.function is not None:
        from rl.core.trainer.agent_programs import load_function

        load_function(agent.function)  # ConfigError if it cannot
    elif agent.enabled:
        from rl.core.trainer.agent_programs import sandbox_of

        sandbox_of(agent.sandbox)
    if config.data.chat_template == "none":
        raise ConfigError(
            "rollout.multi_turn.enable needs the chat template: data.chat_template auto or "
            "native, not none (the chat template describes the tools in the prompt and "
            "renders the tool turns)"
        )
    if config.rollout.multi_turn.tool_config_path is not None:
        build_tools(config)  # ConfigError for what cannot be read or built
    if config.rollout.multi_turn.environment is not None:
        from rl.core.agent.environment import load_environment

        load_environment(config.rollout.multi_turn.environment)  # ConfigError if it cannot
    if config.algorithm.adv_estimator not in ESTIMATORS:
        raise ConfigError(
            f"algorithm.adv_estimator = {config.algorithm.adv_estimator!r} with "
            f"rollout.multi_turn.enable: multi-turn rollouts train with {', '.join(ESTIMATORS)}"
        )


def build_tools(config: Config) -> list[Any]:
    from rl.core.agent.sandbox import SandboxLimits
    from rl.core.agent.tools import Calculator, PythonRunner

    multi_turn = config.rollout.multi_turn
    if multi_turn.tool_config_path is not None:  # verl's tool config
        from rl.core.agent.verl_tools import load_tools
        from rl.core.rewards.gsm8k_rule import gsm8k

        return load_tools(multi_turn.tool_config_path, gsm8k)
    timeout = multi_turn.tool_timeout_s
    made: dict[str, Callable[[], Any]] = {
        "calculator": Calculator,
        "python": lambda: PythonRunner(SandboxLimits(timeout_s=timeout, cpu_s=int(timeout) + 1)),
    }
    return [made[name]() for name in multi_turn.tools]


def agent_loop(config: Config, engine: Any, tokenizer: Any) -> Any:
    from rl.core.agent.loop import AgentLimits, AgentLoop
    from rl.core.agent.parser import CallParser, HermesParser

    multi_turn = config.rollout.multi_turn
    total = multi_turn.max_total_tokens or config.data.max_response_length
    limits = AgentLimits(
        max_turns=multi_turn.max_assistant_turns,
        max_tokens_per_turn=multi_turn.max_tokens_per_turn or total,
        max_total_tokens=min(total, config.data.max_response_length),
        tool_timeout_s=multi_turn.tool_timeout_s,
        max_tool_output_chars=multi_turn.max_tool_response_length,
        truncate_side=multi_turn.tool_response_truncate_side,
        max_parallel_calls=multi_turn.max_parallel_calls,
    )
    tools = build_tools(config)
    parser = CallParser.for_tools(tools) if multi_turn.format == "call" else HermesParser()
    return AgentLoop(engine, tokenizer, tools, parser, limits)


def generate_with_images(
    ctx: RunContext,
    prompt_ids: list[list[int]],
    images: list[Any],
    sampling: SamplingParams,
    pieces: Any = None,
) -> Rollouts:
    """The rollouts of prompts with images (a vision-language model): one generate call
    in which each prompt shows its images (the rollout engine is `SeesImages`, checked
    when it was built). Multi-turn and partial rollouts are refused by name: their turns
    and pieces would be generated without the images."""
    config = ctx.config
    if config.rollout.multi_turn.enable or pieces is not None:
        key = "rollout.multi_turn.enable" if pieces is None else "trainer.partial_rollout"
        raise ConfigError(
            f"{key} = true with prompts that have images: multi-turn and partial rollouts "
            "of a vision-language model are not built yet (each later request would be "
            "generated without the images); turn it off"
        )
    return ctx.rollout.generate_with_images(prompt_ids, images, sampling)


def generate(
    ctx: RunContext, items: list[Any], sampling: SamplingParams, pieces: Any = None
) -> tuple[Rollouts, dict[str, float]]:
    """The rollouts of prompt `items` (and agent metrics): multi-turn when configured, in
    pieces between which weights may change when `pieces` (a `partial.Interruptible`) is
    given. With an environment each trajectory's `returns` entry is its episode return."""
    prompt_ids = [it.prompt_ids for it in items]
    multi_turn = ctx.config.rollout.multi_turn
    images = [it.images for it in items]
    if any(image is not None for image in images):
        return generate_with_images(ctx, prompt_ids, images, sampling, pieces), {}
    if not multi_turn.enable:
        if pieces is not None:
            from rl.core.trainer.partial import generate_in_pieces

            return generate_in_pieces(ctx.rollout, prompt_ids, sampling, pieces), {}
        return ctx.rollout.generate(prompt_ids, sampling), {}
    if multi_turn.agent.enabled:
        from rl.core.trainer.agent_programs import generate_with_programs

        return generate_with_programs(ctx, items, sampling)
    from rl.core.agent.loop import trajectory_metrics

    # an agent's turns are requests of their own, drawn from the engine's stream: the
    # per-prompt seeds of a batched call do not carry over to them (yet)
    sampling = replace(sampling, prompt_seeds=())
    loop = agent_loop(ctx.config, ctx.rollout, ctx.tokenizer)
    environments = tasks = None
    if multi_turn.environment is not None:
        from rl.core.agent.environment import load_environment

        make = load_environment(multi_turn.environment)
        environments = [make() for _ in range(len(items) * sampling.n)]
        tasks = [it.ground_truth for it in items]
    rows = [(it.extra_info or {}).get("tools_kwargs") or {} for it in items]
    trajectories = run_coroutine(
        loop.run_many(prompt_ids, sampling, environments, tasks, tools_kwargs=rows)
    )
    rollouts = Rollouts(
        prompt_ids=[t.prompt_ids for t in trajectories],
        response_ids=[t.response_ids for t in trajectories],
        logprobs=[t.logprobs for t in trajectories],
        finish_reasons=["length" if t.truncated else "stop" for t in trajectories],
        loss_masks=[t.loss_mask for t in trajectories],
        returns=[sum(t.rewards) for t in trajectories] if environments else [],
    )
    return rollouts, dict(trajectory_metrics(trajectories))


def run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run `coroutine` to completion from synchronous code, also when this thread already
    runs an event loop (a notebook, an async service): then in a thread of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with ThreadPoolExecutor(1, thread_name_prefix="rl-agent") as pool:
        return pool.submit(asyncio.run, coroutine).result()
