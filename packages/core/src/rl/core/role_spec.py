"""`RoleSpec`: everything a train engine is built from, for one role, typed.

The controller resolves it once from the config (`rl.core.workers.build.role_spec`) and
hands it to the engine class (`from_spec`, `replica_size`, `fit_world`, `offload_keys`,
`preflight`): an engine reads no other part of the config and never branches on a role's
name. What differs between the roles is a row of `KINDS` (whether it trains, whether its
head gives values, whether it is the policy), and the config section whose keys it reads
(`section`: the reference reads the actor's) names the keys in its messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from rl.core.errors import ConfigError
from rl.core.micro_batches import MicroBatching

Role = Literal["actor", "ref", "critic"]
T = TypeVar("T")


@dataclass(frozen=True)
class RoleKind:
    """What a train role is, as the engine sees it."""

    section: str  # the config section of its keys ("actor" or "critic")
    trains: bool  # an optimizer steps it (the reference is frozen)
    values: bool  # a value head (the critic) instead of the language-model head
    policy: bool  # the trained policy: LoRA adapters and MoE routing replay are its


KINDS: dict[str, RoleKind] = {
    "actor": RoleKind("actor", trains=True, values=False, policy=True),
    "ref": RoleKind("actor", trains=False, values=False, policy=False),
    "critic": RoleKind("critic", trains=True, values=True, policy=False),
}


def section_name(role: str) -> str:
    """The config section that holds `role`'s keys: the reference reads the actor's."""
    return KINDS[role].section


def role_section(config: Any, role: str) -> Any:
    """`config.actor` or `config.critic`: the section of `role`'s keys."""
    return getattr(config, section_name(role))


@dataclass(frozen=True)
class RoleSpec:
    """One train role's engine settings. Built by `role_spec` from a run's config; tests
    and tools may build one directly (the defaults are a small frozen model on the CPU).

    `mini_batch_size` is in rows (prompts per optimizer step × responses per prompt);
    `train_batching` / `forward_batching` cut updates and forward-only passes (rows of
    `micro_batch_size` when not given); `backends` are the role section's backend sections
    by key (`fsdp_config`, `megatron`), read typed through `backend`.
    """

    role: Role = "actor"
    model: Any = None  # rl.core.config.ModelConfig: where the weights come from
    device: str = "cpu"
    dtype: str = "float32"
    seed: int = 0
    optim: Any = None  # rl.core.config.OptimConfig; None for a frozen role
    total_steps: int = 1
    mini_batch_size: int = 8
    micro_batch_size: int = 8
    ppo_epochs: int = 1
    shuffle: bool = False
    temperature: float = 1.0
    use_fused_kernels: bool | None = None
    use_remove_padding: bool = True
    use_prefix_grouper: bool | None = None
    train_batching: MicroBatching | None = None
    forward_batching: MicroBatching | None = None
    sequence_parallel_size: int = 1
    router_replay: str = "disabled"
    lora: Any = None  # rl.core.models.lora.LoraSettings when model.lora_rank > 0
    lora_save_merged: bool = False
    freeze_vision_tower: bool = False  # a vision-language policy's vision tower kept as loaded
    # rollout.batch_invariant: the model's log-probs are a rollout engine's, bit for bit
    batch_invariant: bool = False
    backends: Mapping[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> RoleKind:
        return KINDS[self.role]

    @property
    def section(self) -> str:
        """The config section of this role's keys, for messages (`actor.*`, `critic.*`)."""
        return self.kind.section

    @property
    def replay_mode(self) -> str:
        """MoE routing replay as this role runs it: the policy's mode, off for the others."""
        return self.router_replay if self.kind.policy else "disabled"

    @property
    def updates(self) -> MicroBatching:
        return self.train_batching or MicroBatching(rows=self.micro_batch_size)

    @property
    def forwards(self) -> MicroBatching:
        return self.forward_batching or self.updates

    def backend(self, key: str, cls: type[T]) -> T:
        """The backend section `key` (e.g. `fsdp_config`) as its class `cls`; its defaults
        when the spec carries none (a spec built in code)."""
        section = self.backends.get(key)
        if section is None:
            return cls()
        if not isinstance(section, cls):
            raise ConfigError(
                f"{self.section}.{key} is a {type(section).__name__}, not the "
                f"{cls.__name__} this engine reads (is another version of its backend "
                "installed?)"
            )
        return section
