"""verl's reward models, served as its reward loop serves them (`reward.reward_model.*`).

Discriminative (no custom reward function): a sequence classifier served by the engine
`rollout.name` (hf: transformers' classifier; vllm: its pooling runner; null: hf), each
response's text scored as `RewardModelScorer` renders it.

Generative (verl's GenRM, with a custom reward function): the model served by one of rl's
rollout engines behind an OpenAI-compatible endpoint, and the custom reward function
called as verl calls it there, with `reward_router_address` (the endpoint's `host:port`)
and `reward_model_tokenizer` besides its four arguments. The function writes the judge's
prompt, posts it to `http://<address>/v1/chat/completions` with its own sampling, and
reads the score from the answer; concurrent requests are batched into engine calls.

Either runs where the judges run (`rl.core.workers.judge_server`): in the trainer's
process, or with `enable_resource_pool` in Ray actors of its own, one per
`tensor_model_parallel_size` of the `n_gpus_per_node * nnodes` devices. Both stop with
the run.
"""

from __future__ import annotations

import os
from typing import Any

from rl.core.config.judge import JudgeConfig
from rl.core.rewards.types import RewardRequest, RewardResult
from rl.core.workers.dispatch import spread_rows
from rl.core.workers.judge_server import start_judge
from rl.core.workers.openai_server import OpenAIServer


def served_model_config(config: Any) -> JudgeConfig:
    """The served reward model as a judge role: its model, engine and placement."""
    model = config.reward.reward_model
    rollout = model.rollout
    return JudgeConfig(
        model_path=model.path,
        engine=rollout.name or "hf",
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


def classifier(run_config: Any) -> Any:
    """The classifier the engine `run_config.rollout.name` serves for the reward model."""
    from rl.core.engine_contract import declares
    from rl.core.engines import ServesClassifier
    from rl.core.errors import ConfigError
    from rl.core.registry import load_engine_class

    name = run_config.rollout.name
    engine_class = load_engine_class(name, "rollout", key="reward.reward_model.rollout.name")
    if not declares(engine_class, ServesClassifier):
        raise ConfigError(
            f"reward.reward_model.rollout.name = {name!r} cannot serve a discriminative "
            "reward model (a sequence classifier); hf and vllm can"
        )
    return engine_class.classifier_from_config(run_config)


class ClassifierReplica:
    """One Ray actor's classifier."""

    def __init__(self, run_config: Any) -> None:
        self.classify = classifier(run_config)

    def score(self, texts: list[str]) -> list[float]:
        return list(self.classify(texts))


class RayClassifier:
    """The classifier on `replicas` Ray actors of its own; a call's texts are dealt over
    them in contiguous shares (`spread_rows`, as a rollout role deals its prompts), scored
    at the same time."""

    def __init__(self, run_config: Any, replicas: int, num_cpus: float, num_gpus: float):
        import ray

        from rl.core.workers.ray_group import start_ray

        start_ray(run_config.trainer.ray_address, num_cpus=max(2.0, num_cpus * replicas))
        threads = str(max(1, int(num_cpus)))
        remote: Any = ray.remote(ClassifierReplica).options(
            num_cpus=num_cpus,
            num_gpus=num_gpus,
            runtime_env={"env_vars": {"OMP_NUM_THREADS": threads}},
        )
        self.actors: list[Any] = []
        try:
            for _ in range(replicas):
                self.actors.append(remote.remote(run_config))
            ray.get([actor.__ray_ready__.remote() for actor in self.actors])
        except BaseException:
            self.close()
            raise

    def __call__(self, texts: list[str]) -> list[float]:
        import ray

        shares = spread_rows(len(texts), len(self.actors), rerank=False)
        refs = [
            actor.score.remote([texts[i] for i in share])
            for actor, share in zip(self.actors, shares, strict=True)
            if share
        ]
        return [score for part in ray.get(refs) for score in part]

    def close(self) -> None:
        import ray

        for actor in self.actors:
            ray.kill(actor)
        self.actors = []


def build_discriminative_reward(config: Any) -> Any:
    """The discriminative reward model, where `reward.reward_model` places it."""
    from rl.core.models.loading import load_tokenizer
    from rl.core.rewards.model_scorer import RewardModelScorer
    from rl.core.workers.judge_server import judge_run_config

    served = served_model_config(config)
    run_config = judge_run_config(config, served)
    tokenizer = load_tokenizer(run_config.model)
    if served.placement == "ray":
        gpus = served.tensor_parallel_size if config.trainer.device == "cuda" else 0
        remote = RayClassifier(run_config, served.replicas, served.num_cpus, float(gpus))
        return RewardModelScorer(tokenizer, remote, remote.close)
    return RewardModelScorer(tokenizer, classifier(run_config))
