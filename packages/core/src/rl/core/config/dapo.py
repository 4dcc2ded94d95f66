"""DAPO's settings: overlong reward shaping (`reward.overlong_buffer`, read by
`reward.reward_manager: dapo`) and dynamic sampling (`algorithm.filter_groups`, with
`data.gen_batch_size`). Names as verl's (its DAPO recipe and `FilterGroupsConfig`); the
semantics are in docs/dapo.md."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from rl.core.config.errors import FieldError
from rl.core.config.rules import NON_NEGATIVE, POSITIVE_INT, check_fields, optional, setting

if TYPE_CHECKING:
    from rl.core.config.schema import Config

# What `algorithm.filter_groups.metric` may name: a reward function's own numeric extras
# (its dict's keys) are allowed too, so the set is not closed; these are verl's documented
# ones, computed by rl itself (`reward`: verl 0.9's name of the response's reward).
FILTER_METRICS = ("acc", "score", "seq_reward", "seq_final_reward", "reward")


@dataclass(frozen=True)
class OverlongBufferConfig:
    """Penalise responses longer than `max_resp_len - len`: linearly from 0 to
    `-penalty_factor` over the last `len` tokens (verl's DAPORewardManager)."""

    enable: bool = False
    len: int = setting(0, NON_NEGATIVE)
    # verl's DAPO recipe default: set it with enable
    penalty_factor: float = setting(0.0, NON_NEGATIVE)
    log: bool = False  # report reward/overlong_reward and reward/overlong (verl: same switch)
    # verl's reward_kwargs.max_resp_len; null: data.max_response_length
    max_resp_len: int | None = setting(None, optional(POSITIVE_INT))

    def __post_init__(self) -> None:
        check_fields(self)
        if self.enable and self.len <= 0:
            raise FieldError(
                "len", self.len, "> 0 when overlong_buffer.enable (0 tokens cannot shape)"
            )


@dataclass(frozen=True)
class FilterGroupsConfig:
    """Dynamic sampling: drop the groups whose `metric` is the same for all n samples,
    generate `data.gen_batch_size` prompts at a time until `data.train_batch_size` groups
    are kept; `max_num_gen_batches` > 0 stops the run (as verl) after that many."""

    enable: bool = False
    metric: str | None = None
    max_num_gen_batches: int = 0  # <= 0: no cap

    def __post_init__(self) -> None:
        if self.enable and not self.metric:
            raise FieldError(
                "metric",
                self.metric,
                f"a metric with filter_groups.enable: one of {', '.join(FILTER_METRICS)}, or a "
                "numeric key your reward function returns",
            )


RewardManagerName = Literal["naive", "dapo"]


def check_dapo(config: Config) -> None:
    """Checks across sections (keys named in full)."""
    reward, data, algorithm = config.reward, config.data, config.algorithm
    buffer = reward.overlong_buffer
    if buffer.enable:
        if reward.reward_manager != "dapo":
            raise FieldError(
                "reward.overlong_buffer.enable",
                True,
                "false unless reward.reward_manager = dapo (verl's naive manager takes no "
                "overlong buffer)",
            )
        max_len = buffer.max_resp_len or data.max_response_length
        if buffer.len > max_len:
            raise FieldError(
                "reward.overlong_buffer.len",
                buffer.len,
                f"<= the maximum response length ({max_len})",
            )
    gen = data.gen_batch_size
    if gen is not None and gen != data.train_batch_size and not algorithm.filter_groups.enable:
        raise FieldError(
            "data.gen_batch_size",
            gen,
            f"null or data.train_batch_size ({data.train_batch_size}) unless "
            "algorithm.filter_groups.enable (a step trains on train_batch_size prompts)",
        )
    if gen is not None and data.builtin_train and data.builtin_train_size < gen:
        raise FieldError(
            "data.builtin_train_size",
            data.builtin_train_size,
            f">= data.gen_batch_size ({gen}), the prompts of one generation",
        )
    filtering = algorithm.filter_groups
    if not filtering.enable:
        return
    if config.trainer.mode != "sync":
        raise FieldError(
            "algorithm.filter_groups.enable",
            True,
            f"false with trainer.mode = {config.trainer.mode}: dynamic sampling runs in "
            "trainer.mode = sync (it generates until the step's batch is full)",
        )
    if filtering.metric == "seq_final_reward" and algorithm.use_kl_in_reward:
        raise FieldError(
            "algorithm.filter_groups.metric",
            filtering.metric,
            "acc, score or seq_reward with algorithm.use_kl_in_reward (rl filters before the "
            "KL penalty enters the rewards)",
        )
    if config.algorithm.adv_estimator == "remax":
        raise FieldError(
            "algorithm.filter_groups.enable",
            True,
            "false with algorithm.adv_estimator = remax (its greedy baselines are made per "
            "step, not per generation batch)",
        )
