"""The batch arithmetic of one step, per rank: global → mini → micro, and what each rollout
replica draws. Pure: the sizes in, the figures out.

    rows per step        data.train_batch_size × rollout.n   (responses)
    data-parallel ranks  train ranks ÷ ranks per model copy  (launch.replica_size: Ulysses'
                         group, megatron's TP × PP × CP)
    rows per rank        rows per step ÷ data-parallel ranks
    optimizer steps      data.train_batch_size ÷ ppo_mini_batch_size × ppo_epochs
    rows per mini/rank   ppo_mini_batch_size × rollout.n ÷ data-parallel ranks
    micro-batches/mini   ⌈rows per mini/rank ÷ ppo_micro_batch_size_per_gpu⌉, each of at most
                         micro rows × (max_prompt_length + max_response_length) tokens, or
                         (use_dynamic_bsz) of at most ppo_max_token_len_per_gpu tokens
    rollout replicas     rollout devices ÷ rollout.tensor_parallel_size
    prompts per replica  ⌈data.train_batch_size ÷ replicas⌉ (whole prompts, all n samples of
                         each), samples = that × rollout.n; with rollout.data_rerank single
                         samples are spread: ⌈train_batch_size × n ÷ replicas⌉;
                         under dynamic sampling (algorithm.filter_groups) each draw is of
                         data.gen_batch_size prompts instead

A split that cannot be even is refused by `check_batches` with the key to change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rl.core.config import ConfigError
from rl.core.micro_batches import Rows


@dataclass(frozen=True)
class TrainBatches(Rows):
    """One train role's (actor or critic) figures per step and per data-parallel rank."""

    role: str = "actor"
    ranks: int = 1  # train ranks the role runs on
    ranks_per_copy: int = 1  # ranks that share one model copy and its rows
    micro_batch_size: int = 8  # rows per micro-batch
    epochs: int = 1
    seq_len: int = 1  # max_prompt_length + max_response_length
    response_len: int = 1
    token_budget: int | None = None  # use_dynamic_bsz: tokens per micro-batch

    @property
    def dp(self) -> int:
        return max(1, self.ranks // self.ranks_per_copy)

    @property
    def rows_per_rank(self) -> int:
        return self.rows // self.dp

    @property
    def optimizer_steps(self) -> int:
        return self.prompts // self.mini_batch_size * self.epochs

    @property
    def rows_per_mini_per_rank(self) -> int:
        return self.rows_per_mini // self.dp

    @property
    def micro_rows(self) -> int:
        """Rows in the largest micro-batch (a micro size above the mini's rows is capped)."""
        return max(1, min(self.micro_batch_size, self.rows_per_mini_per_rank))

    @property
    def micro_per_mini(self) -> int:
        """Micro-batches (gradient accumulation steps) per optimizer step, by row count; with a
        token budget it depends on the lengths: about this many when every row is longest."""
        if self.token_budget is not None:
            return math.ceil(self.rows_per_mini_per_rank * self.seq_len / self.token_budget)
        return math.ceil(self.rows_per_mini_per_rank / self.micro_rows)

    @property
    def micro_tokens(self) -> int:
        """Tokens (prompt + response) in the largest micro-batch."""
        if self.token_budget is not None:
            return self.token_budget
        return self.micro_rows * self.seq_len

    @property
    def micro_response_tokens(self) -> int:
        """Response tokens of the largest micro-batch: the rows the log-probs are over."""
        if self.token_budget is not None:
            return min(self.token_budget, self.rows_per_mini_per_rank * self.response_len)
        return self.micro_rows * self.response_len


@dataclass(frozen=True)
class RolloutBatches:
    devices: int  # the rollout's devices (1 with the local launcher)
    tensor_parallel_size: int
    prompts: int  # per generation: data.train_batch_size, or gen_batch_size (DAPO)
    n: int
    rerank: bool = False

    @property
    def replicas(self) -> int:
        return max(1, self.devices // self.tensor_parallel_size)

    @property
    def prompts_per_replica(self) -> int:
        """Whole prompts each replica draws (the last may draw fewer); with data_rerank
        samples are spread one by one, so up to this many prompts contribute to a replica."""
        if self.rerank:
            return min(self.prompts, self.samples_per_replica)
        return math.ceil(self.prompts / self.replicas)

    @property
    def samples_per_replica(self) -> int:
        if self.rerank:
            return math.ceil(self.prompts * self.n / self.replicas)
        return self.prompts_per_replica * self.n


def check_batches(train: TrainBatches) -> None:
    """Refuse what cannot split evenly, naming the key to change (a ConfigError)."""
    role, dp = train.role, train.dp
    if train.ranks % train.ranks_per_copy:
        raise ConfigError(
            f"{role}: {train.ranks_per_copy} ranks per model copy (ulysses_sequence_parallel_"
            f"size, or megatron's TP × PP × CP) do not divide its {train.ranks} ranks"
        )
    if train.prompts % train.mini_batch_size:
        raise ConfigError(
            f"data.train_batch_size = {train.prompts} is not a multiple of "
            f"{role}.ppo_mini_batch_size ({train.mini_batch_size})"
        )
    train.check_split(dp, role)
    if train.token_budget is not None and train.token_budget < train.seq_len:
        key = f"{role}.ppo_max_token_len_per_gpu"
        raise ConfigError(
            f"{key} = {train.token_budget} is less than one row's "
            f"{train.seq_len} tokens (max_prompt_length + max_response_length): raise {key}"
        )


def check_rollout(rollout: RolloutBatches) -> None:
    tp = rollout.tensor_parallel_size
    if rollout.devices < tp or rollout.devices % tp:
        raise ConfigError(
            f"rollout.tensor_parallel_size = {tp} does not divide the rollout's "
            f"{rollout.devices} device(s): set it to a divisor of {rollout.devices}"
        )
