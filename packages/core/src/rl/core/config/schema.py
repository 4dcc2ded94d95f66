"""The configuration schema: one frozen dataclass per section.

Key names follow verl where the seed systems agree (actor.ppo_mini_batch_size,
algorithm.adv_estimator, ...). Every value is checked when the config is built;
an error names the key, the value and what is allowed. A section checks its own
fields by their names within it (`OptimConfig` is `actor.optim` and `critic.optim`);
`convert.from_dict` adds the section path. `Config` checks keys across sections by
their full names. What needs the machine (files, CUDA, installed engines, registered
algorithm names) is checked by `rl.core.trainer.preflight`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from rl.core.config.algorithm import AlgorithmConfig, KLControlConfig
from rl.core.config.cluster import ClusterConfig
from rl.core.config.dapo import check_dapo
from rl.core.config.distillation import DistillationConfig
from rl.core.config.lora import check_lora
from rl.core.config.resume_rules import free
from rl.core.config.reward import (
    CustomRewardConfig,
    RewardConfig,
    RewardModelConfig,
    SandboxConfig,
)
from rl.core.config.rollout import LOG_PROB_RULES, RolloutConfig
from rl.core.config.router_replay import RouterReplayConfig
from rl.core.config.rules import (
    BETAS,
    FILES,
    FRACTION,
    NON_NEGATIVE,
    NOT_EMPTY,
    POSITIVE,
    POSITIVE_INT,
    PROBABILITY,
    SEED,
    above,
    between,
    check,
    optional,
    require,
)
from rl.core.config.sections import HasBackendSections, default_sections
from rl.core.config.sft import SFTConfig
from rl.core.config.trainer import LOGGERS, TrainerConfig

# sections defined in their own modules, importable from here as before
__all__ = [
    "LOGGERS",
    "AlgorithmConfig",
    "CustomRewardConfig",
    "KLControlConfig",
    "RewardConfig",
    "RewardModelConfig",
    "SFTConfig",
    "SandboxConfig",
    "TrainerConfig",
]


# actor.use_fused_kernels=null on CPU: the fused log-prob path from this vocabulary size on.
# At 152K tokens the plain path's [response tokens, vocab] logits and their softmax copies
# were ~2 GB of a Qwen2.5-shaped step's peak (rl.bench grpo-step); for a toy vocabulary
# they cost nothing and the plain path is the faster one.
FUSED_VOCAB_ON_CPU = 16384


def fused_log_probs(setting: bool | None, device_type: str, vocab_size: int) -> bool:
    """Whether the log-prob passes take the fused path: `actor.use_fused_kernels`, or for
    null, on GPU and at a vocabulary of `FUSED_VOCAB_ON_CPU` tokens or more (the engine's
    choice and `rl plan`'s count of it)."""
    if setting is not None:
        return setting
    return device_type == "cuda" or vocab_size >= FUSED_VOCAB_ON_CPU


@dataclass(frozen=True)
class TinyModelConfig:
    """A small Qwen2-architecture model built from a config with random weights."""

    hidden_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    num_key_value_heads: int = 1
    intermediate_size: int = 256

    def __post_init__(self) -> None:
        check(
            self,
            hidden_size=POSITIVE_INT,
            num_hidden_layers=POSITIVE_INT,
            num_attention_heads=POSITIVE_INT,
            intermediate_size=POSITIVE_INT,
        )
        head_dim, rest = divmod(self.hidden_size, self.num_attention_heads)
        require(
            rest == 0 and head_dim in (32, 64, 128, 256),
            "hidden_size",
            self.hidden_size,
            "hidden_size / num_attention_heads must be 32, 64, 128 or 256 "
            "(the head dims vLLM's CPU build serves)",
        )
        heads, kv_heads = self.num_attention_heads, self.num_key_value_heads
        require(
            kv_heads >= 1 and heads % kv_heads == 0,
            "num_key_value_heads",
            kv_heads,
            f">= 1 and a divisor of num_attention_heads ({heads})",
        )


@dataclass(frozen=True)
class ModelConfig:
    path: str = "builtin:tiny-qwen2"  # a Hugging Face folder, or the built-in demo model
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    tiny: TinyModelConfig = field(default_factory=TinyModelConfig)
    gradient_checkpointing: bool = False
    trust_remote_code: bool = False  # run the Python code a model folder ships (verl's name)
    # the tokenizer's folder or Hub id when model.path has none (verl's
    # actor_rollout_ref.model.tokenizer_path); None: model.path's
    tokenizer_path: str | None = None
    # a Jinja chat template used instead of the tokenizer's own (verl's name)
    custom_chat_template: str | None = None
    # LoRA adapters on the actor (verl's actor_rollout_ref.model.lora_*; docs/lora.md):
    # rank 0 = off; target_modules "all-linear" or module names; lora_adapter_path: start
    # from a saved PEFT adapter; lora_save_merged: exports also write the merged model
    lora_rank: int = 0
    lora_alpha: float = 16
    target_modules: str | tuple[str, ...] = "all-linear"
    exclude_modules: tuple[str, ...] | None = None
    lora_adapter_path: str | None = None
    lora_save_merged: bool = False

    def __post_init__(self) -> None:
        check(
            self,
            path=NOT_EMPTY,
            tokenizer_path=optional(NOT_EMPTY),
            custom_chat_template=optional(NOT_EMPTY),
        )
        check_lora(self)


@dataclass(frozen=True)
class DataConfig:
    train_files: tuple[str, ...] = ("builtin:arithmetic",)
    val_files: tuple[str, ...] = free(("builtin:arithmetic",))
    prompt_key: str = "prompt"
    answer_key: str = "answer"
    data_source_key: str = "data_source"
    # whole conversations (verl's multi-turn SFT `messages_key`): each row's messages up to
    # the first assistant turn are its prompt, the rest its SFT demonstration (assistant turns
    # learned, the others read); null: prompt and answer columns
    messages_key: str | None = None
    # auto: chat messages through the tokenizer's chat template (as verl), text as it is;
    # native: text too, as one user message; none: messages' contents joined by newlines
    chat_template: Literal["auto", "native", "none"] = "auto"
    apply_chat_template_kwargs: dict[str, Any] = field(default_factory=dict)  # enable_thinking
    max_prompt_length: int = 32
    max_response_length: int = 8
    truncation: Literal["error", "left", "right"] = "error"
    filter_overlong_prompts: bool = False
    filter_num_workers: int = free(1)
    train_batch_size: int = 16
    gen_batch_size: int | None = (
        None  # prompts per generation (dynamic sampling); null: train_batch_size
    )
    val_batch_size: int = free(64)
    shuffle: bool = True
    seed: int = 1
    builtin_train_size: int = 2000
    builtin_val_size: int = free(64)
    builtin_max_operand: int = 9

    def __post_init__(self) -> None:
        check(
            self,
            train_files=FILES,
            val_files=FILES,
            prompt_key=NOT_EMPTY,
            answer_key=NOT_EMPTY,
            data_source_key=NOT_EMPTY,
            max_prompt_length=POSITIVE_INT,
            max_response_length=POSITIVE_INT,
            filter_num_workers=POSITIVE_INT,
            train_batch_size=POSITIVE_INT,
            gen_batch_size=optional(POSITIVE_INT),
            val_batch_size=POSITIVE_INT,
            seed=SEED,
            builtin_train_size=POSITIVE_INT,
            builtin_val_size=POSITIVE_INT,
            builtin_max_operand=NON_NEGATIVE,
        )

    @property
    def builtin_train(self) -> bool:
        """Training prompts generated in code (the demo task), not read from files."""
        from rl.core.demo import is_builtin

        return is_builtin(self.train_files)


@dataclass(frozen=True)
class OptimConfig:
    lr: float = 1e-5
    weight_decay: float = 0.0
    betas: tuple[float, ...] = (0.9, 0.999)
    eps: float = 1e-8  # Adam's denominator term (verl's `eps`; RLinf adam_eps, ROLL adam_epsilon)
    lr_scheduler: Literal["constant", "cosine", "linear", "wsd"] = "constant"
    lr_warmup_steps: int = 0
    lr_warmup_ratio: float = 0.0
    min_lr_ratio: float = 0.0
    wsd_decay_ratio: float = 0.1
    grad_clip: float = 1.0
    # the megatron engine's schedule (megatron-core's OptimizerParamScheduler; verl's
    # megatron optim keys): warmup from this LR, decay over this many steps (null: all),
    # WSD's decay shape, weight decay constant or rising, and whether a resumed run keeps
    # the checkpoint's schedule settings over the config's
    lr_warmup_init: float = 0.0
    lr_decay_steps: int | None = None
    lr_wsd_decay_style: Literal["linear", "cosine", "exponential", "minus_sqrt"] = "linear"
    weight_decay_incr_style: Literal["constant", "linear", "cosine"] = "constant"
    use_checkpoint_opt_param_scheduler: bool = False

    def __post_init__(self) -> None:
        check(
            self,
            lr_warmup_init=NON_NEGATIVE,
            lr_decay_steps=optional(POSITIVE_INT),
            lr=POSITIVE,
            weight_decay=NON_NEGATIVE,
            betas=BETAS,
            eps=POSITIVE,
            lr_warmup_steps=NON_NEGATIVE,
            lr_warmup_ratio=FRACTION,
            min_lr_ratio=PROBABILITY,
            wsd_decay_ratio=PROBABILITY,
            # clip_grad_norm_ scales gradients by grad_clip / norm: <= 0 flips or zeroes them
            grad_clip=POSITIVE,
        )


# Checks the actor and the critic share (each runs PPO mini-batch updates).
PPO_UPDATE_RULES = {
    "strategy": NOT_EMPTY,
    "ulysses_sequence_parallel_size": POSITIVE_INT,
    "ppo_mini_batch_size": POSITIVE_INT,
    "ppo_micro_batch_size_per_gpu": POSITIVE_INT,
    "ppo_epochs": POSITIVE_INT,
}


@dataclass(frozen=True)
class ActorConfig(HasBackendSections):
    strategy: str = "fsdp"  # the train engine, found through the rl.engines registry
    optim: OptimConfig = field(default_factory=OptimConfig)
    ppo_mini_batch_size: int = 8  # prompts per optimizer step (× rollout.n responses)
    ppo_micro_batch_size_per_gpu: int = free(16)  # responses per forward/backward
    ppo_epochs: int = 1
    shuffle: bool = False
    policy_loss: str = "vanilla"
    loss_agg_mode: str = "token-mean"
    # fixed normaliser of token-sum / seq-mean-token-sum-norm (null: 1 / the response length)
    loss_scale_factor: float | None = None
    clip_ratio: float = 0.2
    clip_ratio_low: float | None = None
    clip_ratio_high: float | None = None
    clip_ratio_c: float | None = 3.0  # null: no dual clip (ROLL's and RLinf's off switch)
    # ChatLearn's final_clip_ratio: each token's clipped policy loss is at most this,
    # whatever the advantage's sign (vanilla and gspo; null: off)
    policy_loss_cap: float | None = None
    entropy_coeff: float = 0.0
    use_kl_loss: bool = False
    kl_loss_coef: float = 0.001
    kl_loss_type: str = "low_var_kl"
    early_stop_imp_ratio: float | None = None  # RLinf: drop tokens whose ratio exceeds it
    use_valid_token_scale: bool = False  # RLinf
    # truncated IS vs rollout log-probs (None: off); the simple case of
    # algorithm.rollout_correction (rollout_is: token, rollout_is_threshold: tis_cap)
    tis_cap: float | None = None
    # rl.kernels.fused_logprob_entropy for every log-prob pass (old, reference, training);
    # null = auto: on GPU, and on CPU for a vocabulary of 16384 tokens or more (it saves the
    # [tokens, vocab] logits); the plain path for a toy vocabulary on CPU
    use_fused_kernels: bool | None = None
    # the old policy's log-probs: auto = from the update's own first forward when that is
    # provably the same policy (one epoch of one mini-batch, nothing needing them before
    # the update: rollout correction, KL in reward); always = a separate forward pass
    old_log_prob_pass: Literal["auto", "always"] = "auto"
    # packed rows (no padding tokens) and micro-batches by token budget instead of row count
    use_remove_padding: bool = True
    # packed rows hold each distinct prompt once for its responses (verl's name): every
    # position-wise layer runs on fewer tokens, the results are the same to rounding;
    # null = on wherever it applies (packed rows, no Ulysses), for the reference pass too
    use_prefix_grouper: bool | None = None
    use_dynamic_bsz: bool = free(False)
    ppo_max_token_len_per_gpu: int = free(16384)
    # the train backends' own sections, by their keys (`actor.fsdp_config`, `actor.megatron`;
    # also the reference's): rl.core.config.sections
    backends: dict[str, Any] = field(default_factory=default_sections)
    # Ulysses: ranks that split each packed row (attention heads over an all-to-all)
    ulysses_sequence_parallel_size: int = 1
    # MoE routing replay (verl's router_replay.mode: disabled | R2 | R3)
    router_replay: RouterReplayConfig = field(default_factory=RouterReplayConfig)

    def __post_init__(self) -> None:
        check(self, **PPO_UPDATE_RULES)
        check(
            self,
            loss_scale_factor=optional(POSITIVE),
            # the ratio is kept in [1 - low, 1 + high]: low must leave it positive,
            # high may be wide (DAPO clip-higher 0.28; CISPO-style bounds of several)
            clip_ratio=between(0, 1, open_low=True, open_high=True),
            clip_ratio_low=optional(FRACTION),
            clip_ratio_high=optional(POSITIVE),
            clip_ratio_c=optional(above(1)),  # dual clip bounds the loss at c * |A| for A < 0
            policy_loss_cap=optional(POSITIVE),
            kl_loss_coef=NON_NEGATIVE,
            early_stop_imp_ratio=optional(POSITIVE),
            tis_cap=optional(POSITIVE),
            ppo_max_token_len_per_gpu=POSITIVE_INT,
        )


@dataclass(frozen=True)
class CriticConfig(HasBackendSections):
    strategy: str = "fsdp"
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=1e-4))
    ppo_mini_batch_size: int = 8
    ppo_micro_batch_size_per_gpu: int = free(16)
    ppo_epochs: int = 1
    cliprange_value: float = 0.5
    loss_agg_mode: str = "token-mean"
    loss_scale_factor: float | None = None
    use_remove_padding: bool = True
    use_prefix_grouper: bool | None = None  # as the actor's
    use_dynamic_bsz: bool = free(False)
    ppo_max_token_len_per_gpu: int = free(32768)
    forward_max_token_len_per_gpu: int = free(32768)  # compute_values (no gradients)
    backends: dict[str, Any] = field(default_factory=default_sections)  # as the actor's
    ulysses_sequence_parallel_size: int = 1

    def __post_init__(self) -> None:
        check(self, **PPO_UPDATE_RULES)
        check(self, cliprange_value=POSITIVE, loss_scale_factor=optional(POSITIVE))
        check(
            self,
            ppo_max_token_len_per_gpu=POSITIVE_INT,
            forward_max_token_len_per_gpu=POSITIVE_INT,
        )


@dataclass(frozen=True)
class RefConfig:
    """The reference policy's log-prob pass (the model is the actor's)."""

    log_prob_micro_batch_size_per_gpu: int = free(16)
    log_prob_use_dynamic_bsz: bool = free(False)
    log_prob_max_token_len_per_gpu: int = free(16384)

    def __post_init__(self) -> None:
        check(self, **LOG_PROB_RULES)


@dataclass(frozen=True)
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    actor: ActorConfig = field(default_factory=ActorConfig)
    critic: CriticConfig = field(default_factory=CriticConfig)
    ref: RefConfig = field(default_factory=RefConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    cluster: ClusterConfig = free(default_factory=ClusterConfig)
    distillation: DistillationConfig = field(default_factory=DistillationConfig)

    def __post_init__(self) -> None:
        """Checks across sections; keys are full here (the root has no path to add)."""
        data = self.data
        updaters = [("actor", self.actor.ppo_mini_batch_size)]
        if self.uses_critic:
            updaters.append(("critic", self.critic.ppo_mini_batch_size))
        for role, mini_batch in updaters:  # a short last mini-batch would weigh as a full one
            require(
                data.train_batch_size % mini_batch == 0,
                "data.train_batch_size",
                data.train_batch_size,
                f"a multiple of {role}.ppo_mini_batch_size ({mini_batch})",
            )
        require(
            self.rollout.min_new_tokens <= data.max_response_length,
            "rollout.min_new_tokens",
            self.rollout.min_new_tokens,
            f"<= data.max_response_length ({data.max_response_length})",
        )
        self._check_token_budgets()
        self._check_bypass_mode()
        check_dapo(self)
        longest = data.max_prompt_length + data.max_response_length
        require(
            self.rollout.max_model_len is None or self.rollout.max_model_len >= longest,
            "rollout.max_model_len",
            self.rollout.max_model_len,
            f">= data.max_prompt_length + data.max_response_length ({longest})",
        )
        require(
            not data.builtin_train or data.builtin_train_size >= data.train_batch_size,
            "data.builtin_train_size",
            data.builtin_train_size,
            f">= data.train_batch_size ({data.train_batch_size})",
        )

    def _check_bypass_mode(self) -> None:
        """Bypass mode's old log-probs are the rollout's, read by the loss only: a KL
        penalty in the reward (which reads the actor's own before the update) and
        actor.tis_cap (weights against the rollout's, then always 1) do not go with it."""
        if not self.algorithm.rollout_correction.bypass_mode:
            return
        for key, value in (
            ("algorithm.use_kl_in_reward", self.algorithm.use_kl_in_reward),
            ("actor.tis_cap", self.actor.tis_cap),
        ):
            require(
                value in (None, False),
                key,
                value,
                "false/null with algorithm.rollout_correction.bypass_mode (the rollout's "
                "log-probs are the old policy's there)",
            )

    def _check_token_budgets(self) -> None:
        """A token budget must hold the longest row (prompt + response), or no micro-batch can
        take it; checked for each budget that is in use."""
        longest = self.data.max_prompt_length + self.data.max_response_length
        budgets = [
            ("actor.ppo_max_token_len_per_gpu", self.actor.use_dynamic_bsz),
            ("rollout.log_prob_max_token_len_per_gpu", self.rollout.log_prob_use_dynamic_bsz),
            ("ref.log_prob_max_token_len_per_gpu", self.ref.log_prob_use_dynamic_bsz),
            ("critic.ppo_max_token_len_per_gpu", self.critic.use_dynamic_bsz),
            ("critic.forward_max_token_len_per_gpu", self.critic.use_dynamic_bsz),
        ]
        for key, used in budgets:
            section, name = key.split(".")
            value = getattr(getattr(self, section), name)
            require(
                not used or value >= longest,
                key,
                value,
                f">= data.max_prompt_length + data.max_response_length ({longest}), the "
                "longest row",
            )

    @property
    def uses_critic(self) -> bool:
        return self.algorithm.adv_estimator == "gae"

    @property
    def uses_reference(self) -> bool:
        return self.actor.use_kl_loss or self.algorithm.use_kl_in_reward
