"""Everything one run needs, built once from the config: tokenizer, data, rewards, and the
roles' handles (whatever launcher runs their engines)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rl.core.config import Config

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from rl.core.data import PromptDataset, PromptSampler
    from rl.core.rewards import RewardManager, RewardModelScorer
    from rl.core.rewards.domains import DomainRewards, DomainRouting
    from rl.core.rewards.failures import FailureTracker
    from rl.core.trainer.sync_probe import SyncProbe
    from rl.core.workers.launch import LaunchedRoles
    from rl.core.workers.roles import RolloutRole, TrainRole


@dataclass
class RunContext:
    config: Config
    output_dir: Path
    tokenizer: PreTrainedTokenizerBase
    train_data: PromptDataset
    val_data: PromptDataset
    sampler: PromptSampler
    reward: RewardManager | RewardModelScorer | DomainRewards
    # the roles' `TrainEngine` / `RolloutEngine` handles over their workers (None until
    # launched: an SFT-only run never launches them)
    roles: LaunchedRoles | None = None
    # LoRA runs: the check after each sync that the rollout serves the trainer's weights
    probe: SyncProbe | None = None

    @property
    def launched(self) -> LaunchedRoles:
        if self.roles is None:
            raise RuntimeError("the RL roles were not launched (build_context(with_rl_roles))")
        return self.roles

    @functools.cached_property
    def agent_failures(self) -> FailureTracker:
        """Agent programs' failed samples, bounded as failed rewards are
        (`reward.max_error_rate` over `reward.error_rate_window` steps)."""
        from rl.core.rewards.failures import FailureTracker

        reward = self.config.reward
        return FailureTracker(reward.max_error_rate, reward.error_rate_window)

    @functools.cached_property
    def routing(self) -> DomainRouting:
        """Each prompt's reward domain (its data_source when reward.domains is empty)."""
        from rl.core.rewards.domains import DomainRouting

        return DomainRouting(self.config)

    @property
    def actor(self) -> TrainRole:
        return self.launched.actor

    @property
    def rollout(self) -> RolloutRole:
        return self.launched.rollout

    @property
    def ref(self) -> TrainRole | None:
        return self.launched.ref

    @property
    def teacher(self) -> TrainRole | None:
        return self.launched.teacher

    @property
    def critic(self) -> TrainRole | None:
        return self.launched.critic

    def close(self) -> None:
        """End what the run started: the roles' workers, then the reward's scoring processes
        (left to the interpreter's exit, CPython 3.11's hooks race the pool's manager thread
        and can print a Bad-file-descriptor traceback after the run's own last words)."""
        try:
            if self.roles is not None:
                self.roles.shutdown()
        finally:
            close = getattr(self.reward, "close", None)
            if close is not None:
                close()

    def sync_weights(self, version: int) -> dict[str, float]:
        """The actor's weights into the rollout engine(s) -> metrics; `version` is the
        number of updates they hold (the samples they generate record it)."""
        metrics = self.launched.sync_weights(version)
        if self.config.model.lora_rank > 0:  # merged LoRA weights: prove they arrived
            metrics.update(self._probe().check(self.actor, self.rollout, f"weight sync {version}"))
        return metrics

    def _probe(self) -> SyncProbe:
        from rl.core.trainer.sync_probe import SyncProbe, probe_rows

        if self.probe is None:
            rows = probe_rows(self.train_data, self.tokenizer, self.config.data.max_response_length)
            pad = self.tokenizer.pad_token_id
            self.probe = SyncProbe(rows, pad, self.config.rollout.temperature)
        return self.probe

    @property
    def total_steps(self) -> int:
        return total_training_steps(self.config, self.sampler.steps_per_epoch)


def total_training_steps(config: Config, steps_per_epoch: int) -> int:
    if config.trainer.total_training_steps is not None:
        return config.trainer.total_training_steps
    return steps_per_epoch * config.trainer.total_epochs
