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
class RewardModelConfig(Checked):
    """A sequence-classification reward model (one output) instead of rule-based scores."""

    path: str | None = setting(None, optional(NOT_EMPTY))
    batch_size: int = setting(16, POSITIVE_INT)
    max_length: int = setting(2048, POSITIVE_INT)


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
