"""The `reward` section: how responses are scored (rule-based, a custom function, a reward
model), where model-written code runs, and when failing scores stop the run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from rl.core.config.dapo import OverlongBufferConfig, RewardManagerName
from rl.core.config.domains import DomainRewardConfig
from rl.core.config.resume_rules import free
from rl.core.config.rules import (
    NON_NEGATIVE,
    NOT_EMPTY,
    POSITIVE,
    POSITIVE_INT,
    Checked,
    between,
    check_fields,
    optional,
    require,
    setting,
)


@dataclass(frozen=True)
class CustomRewardConfig:
    path: str | None = setting(None, optional(NOT_EMPTY))
    name: str = setting("compute_score", NOT_EMPTY)
    reward_kwargs: dict[str, Any] = field(default_factory=dict)  # passed to it by keyword

    def __post_init__(self) -> None:
        check_fields(self)
        require(
            self.path is not None or not self.reward_kwargs,
            "reward_kwargs",
            self.reward_kwargs,
            "options of a custom reward function: set reward.custom_reward_function.path too",
        )


@dataclass(frozen=True)
class RewardModelRolloutConfig(Checked):
    """verl's reward loop (`reward.reward_model.rollout`): the engine that serves the reward
    model (`name`: hf, vllm). A discriminative model is served as a classifier; a
    generative one behind an OpenAI-compatible endpoint, which its custom function calls
    (`reward_router_address`)."""

    # null: a discriminative model on transformers' classifier (hf); a generative model
    # needs an engine named
    name: str | None = setting(None, optional(NOT_EMPTY))
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"  # auto: model.dtype
    gpu_memory_utilization: float = setting(0.5, between(0, 1, open_low=True))
    tensor_model_parallel_size: int = setting(1, POSITIVE_INT)
    # the served context: max_model_len, else prompt_length + response_length (verl's)
    max_model_len: int | None = setting(None, optional(POSITIVE_INT))
    prompt_length: int = setting(2048, POSITIVE_INT)
    response_length: int = setting(2048, POSITIVE_INT)

    @property
    def context(self) -> int:
        return self.max_model_len or self.prompt_length + self.response_length


@dataclass(frozen=True)
class RewardModelConfig(Checked):
    """A reward model instead of rule-based scores, as verl's reward loop serves one:
    discriminative (a sequence classifier; its last label's logit is the score), or
    generative (`rollout.name` with a custom reward function: the model served, the
    function prompting it and reading its answer)."""

    path: str | None = setting(None, optional(NOT_EMPTY))
    batch_size: int = setting(16, POSITIVE_INT)
    max_length: int = setting(2048, POSITIVE_INT)
    rollout: RewardModelRolloutConfig = field(default_factory=RewardModelRolloutConfig)
    # where the model runs: false, in the trainer's process; true, in Ray actors of its
    # own, n_gpus_per_node * nnodes devices (at least one actor) of num_cpus each,
    # tensor_model_parallel_size devices an actor
    enable_resource_pool: bool = False
    n_gpus_per_node: int = setting(0, NON_NEGATIVE)
    nnodes: int = setting(0, NON_NEGATIVE)
    num_cpus: float = setting(1.0, POSITIVE)

    def __post_init__(self) -> None:
        check_fields(self)
        require(
            self.path is not None or self.rollout.name is None,
            "rollout.name",
            self.rollout.name,
            "null without reward.reward_model.path (the model to serve)",
        )
        require(
            self.path is not None or not self.enable_resource_pool,
            "enable_resource_pool",
            self.enable_resource_pool,
            "false without reward.reward_model.path (the model to place)",
        )

    @property
    def replicas(self) -> int:
        """The served model's Ray actors, with enable_resource_pool."""
        devices = self.n_gpus_per_node * self.nnodes
        return max(1, devices // self.rollout.tensor_model_parallel_size)


@dataclass(frozen=True)
class SandboxConfig:
    """Where model-written code runs (the code reward and the `python` tool): its promise
    under each boundary is in `rl.core.agent.sandbox`. verl's counterpart is a remote
    service (`reward.sandbox_fusion.url`); rl runs its own."""

    # auto: the strongest that works here (bwrap, then unshare, then the guard alone);
    # a named one that does not work here is refused at start
    boundary: Literal["auto", "bwrap", "unshare", "guard"] = "auto"


@dataclass(frozen=True)
class RewardConfig(Checked):
    custom_reward_function: CustomRewardConfig = field(default_factory=CustomRewardConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    reward_model: RewardModelConfig = field(default_factory=RewardModelConfig)
    # several scorers, each row routed by its domain (ROLL's rewards.<domain>); empty: one
    # reward for every row (rule-based by data_source, a custom function or a model)
    domains: dict[str, DomainRewardConfig] = field(default_factory=dict)
    reward_manager: RewardManagerName = "naive"  # dapo: verl's DAPO manager (overlong_buffer)
    overlong_buffer: OverlongBufferConfig = field(default_factory=OverlongBufferConfig)
    reward_scale: float | None = setting(None, optional(POSITIVE))
    num_workers: int = free(0, NON_NEGATIVE)
    # score in the background while the old / reference log-probs and values are computed
    # (verl's launch_reward_fn_async); rule scoring then runs in the pool (num_workers > 0),
    # which enforces the per-response timeout off the main thread
    launch_reward_fn_async: bool = free(False)
    # score while generating (rl's own): the step's prompts generated in this many chunks
    # of whole groups, each scored in the background while the next one generates (the
    # same samples and scores: per-prompt seeds); 0 or 1: generate, then score
    stream_chunks: int = free(0, NON_NEGATIVE)
    timeout_s: float = free(10.0, POSITIVE)
    # stop the run when more than this share of responses fail to score (errors, non-finite
    # or wrong-typed results, timeouts) over the last `error_rate_window` scoring calls;
    # 1.0 never stops
    max_error_rate: float = setting(0.5, between(0, 1, open_low=True))
    error_rate_window: int = setting(5, POSITIVE_INT)

    def __post_init__(self) -> None:
        check_fields(self)
        require(
            self.reward_model.rollout.name is None or not self.domains,
            "reward_model.rollout.name",
            self.reward_model.rollout.name,
            "null with reward.domains (a domain's served model is its judge: "
            "reward.domains.<d>.judge)",
        )

    @property
    def generative_reward_model(self) -> bool:
        """A served reward model prompted by the custom function (verl's GenRM)."""
        served = self.reward_model.rollout.name is not None
        return served and self.custom_reward_function.path is not None
