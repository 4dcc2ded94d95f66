"""verl's generative reward model (its reward loop's GenRM): the reward model
(`reward.reward_model.path`) served by one of rl's rollout engines
(`reward.reward_model.rollout.name`) behind an OpenAI-compatible endpoint, and the custom
reward function called as verl calls it there, with `reward_router_address` (the
endpoint's `host:port`) and `reward_model_tokenizer` besides its four arguments. The
function writes the judge's prompt, posts it to `http://<address>/v1/chat/completions`
with its own sampling, and reads the score from the answer.

The model runs where the judges run (`rl.core.workers.judge_server`): in the trainer's
process, or with `enable_resource_pool` in Ray actors of its own, one per
`tensor_model_parallel_size` of the `n_gpus_per_node * nnodes` devices; concurrent
requests are batched into engine calls. The endpoint and the model stop with the run.
"""

from __future__ import annotations

import os
from typing import Any

from rl.core.config.judge import JudgeConfig
from rl.core.rewards.types import RewardRequest, RewardResult
from rl.core.workers.judge_server import start_judge
from rl.core.workers.openai_server import OpenAIServer


def served_model_config(config: Any) -> JudgeConfig:
    """The served reward model as a judge role: its model, engine and placement."""
    model = config.reward.reward_model
    rollout = model.rollout
    return JudgeConfig(
        model_path=model.path,
        engine=rollout.name,
        dtype=rollout.dtype,
        placement="ray" if model.enable_resource_pool else "colocated",
        replicas=model.replicas if model.enable_resource_pool else 1,
        num_cpus=model.num_cpus,
        tensor_parallel_size=rollout.tensor_model_parallel_size,
        batch_size=model.batch_size,
        max_new_tokens=1,
        max_model_len=rollout.context,
        gpu_memory_utilization=rollout.gpu_memory_utilization,
    )


def served_names(path: str) -> list[str]:
    """The names a request's `model` may give: the configured path, expanded and resolved
    (verl's functions send the path they were configured with, `~` expanded or not)."""
    names = [path, os.path.expanduser(path), os.path.realpath(os.path.expanduser(path))]
    return list(dict.fromkeys(names))


class ServedRewardModel:
    """The reward model's engine and its endpoint, started together."""

    def __init__(self, config: Any) -> None:
        from rl.core.models.loading import load_tokenizer
        from rl.core.workers.judge_server import judge_run_config

        served = served_model_config(config)
        run_config = judge_run_config(config, served)
        self.tokenizer = load_tokenizer(run_config.model)
        self.model = start_judge(config, served)
        try:
            self.server = OpenAIServer(
                self.model.agenerate,
                self.tokenizer,
                served_names(str(served.model_path)),
                max_model_len=served.max_model_len,
                max_batch_size=served.batch_size * served.replicas,
                timeout_s=max(config.reward.timeout_s, 60.0),
            )
            self.address = self.server.start()
        except BaseException:
            self.model.close()
            raise

    def reward_kwargs(self) -> dict[str, Any]:
        """What verl's reward loop passes a custom function beside its four arguments."""
        return {"reward_router_address": self.address, "reward_model_tokenizer": self.tokenizer}

    def close(self) -> None:
        self.server.close()
        self.model.close()


class GenerativeRewardModel:
    """The run's reward: the custom function's manager, and the model it prompts."""

    def __init__(self, manager: Any, served: ServedRewardModel) -> None:
        self.manager, self.served = manager, served
        self.answered = 0

    def score(self, requests: list[RewardRequest]) -> RewardResult:
        result: RewardResult = self.manager.score(requests)
        answered, self.answered = self.answered, self.served.server.requests
        result.metrics["reward/reward_model_requests"] = float(self.answered - answered)
        return result

    def close(self) -> None:
        try:
            self.manager.close()
        finally:
            self.served.close()


def build_generative_reward(config: Any) -> GenerativeRewardModel:
    from rl.core.rewards.manager import make_reward_manager

    served = ServedRewardModel(config)
    try:
        manager = make_reward_manager(config.reward, served.reward_kwargs())
    except BaseException:
        served.close()
        raise
    return GenerativeRewardModel(manager, served)
