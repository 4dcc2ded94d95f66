"""The `reward` section: how responses are scored (rule-based, a custom function, a reward
model), where model-written code runs, and when failing scores stop the run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from rl.core.config.dapo import OverlongBufferConfig, RewardManagerName
from rl.core.config.resume_rules import free
from rl.core.config.rules import (
    NON_NEGATIVE,
    NOT_EMPTY,
    POSITIVE,
    POSITIVE_INT,
    between,
    check,
    optional,
    require,
)


@dataclass(frozen=True)
class CustomRewardConfig:
    path: str | None = None
    name: str = "compute_score"
    reward_kwargs: dict[str, Any] = field(default_factory=dict)  # passed to it by keyword

    def __post_init__(self) -> None:
        check(self, path=optional(NOT_EMPTY), name=NOT_EMPTY)
        require(
            self.path is not None or not self.reward_kwargs,
            "reward_kwargs",
            self.reward_kwargs,
            "options of a custom reward function: set reward.custom_reward_function.path too",
        )


@dataclass(frozen=True)
class RewardModelConfig:
    """A sequence-classification reward model (one output) instead of rule-based scores."""

    path: str | None = None
    batch_size: int = 16
    max_length: int = 2048

    def __post_init__(self) -> None:
        check(self, path=optional(NOT_EMPTY), batch_size=POSITIVE_INT, max_length=POSITIVE_INT)


@dataclass(frozen=True)
class SandboxConfig:
    """Where model-written code runs (the code reward and the `python` tool): its promise
    under each boundary is in `rl.core.agent.sandbox`. verl's counterpart is a remote
    service (`reward.sandbox_fusion.url`); rl runs its own."""

    # auto: the strongest that works here (bwrap, then unshare, then the guard alone);
    # a named one that does not work here is refused at start
    boundary: Literal["auto", "bwrap", "unshare", "guard"] = "auto"


@dataclass(frozen=True)
class RewardConfig:
    custom_reward_function: CustomRewardConfig = field(default_factory=CustomRewardConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    reward_model: RewardModelConfig = field(default_factory=RewardModelConfig)
    reward_manager: RewardManagerName = "naive"  # dapo: verl's DAPO manager (overlong_buffer)
    overlong_buffer: OverlongBufferConfig = field(default_factory=OverlongBufferConfig)
    reward_scale: float | None = None
    num_workers: int = free(0)
    timeout_s: float = free(10.0)
    # stop the run when more than this share of responses fail to score (errors, non-finite
    # or wrong-typed results, timeouts) over the last `error_rate_window` scoring calls;
    # 1.0 never stops
    max_error_rate: float = 0.5
    error_rate_window: int = 5

    def __post_init__(self) -> None:
        check(
            self,
            reward_scale=optional(POSITIVE),  # scores become +-reward_scale: < 0 flips them
            num_workers=NON_NEGATIVE,  # 0: score in the trainer process
            timeout_s=POSITIVE,
            max_error_rate=between(0, 1, open_low=True),
            error_rate_window=POSITIVE_INT,
        )
