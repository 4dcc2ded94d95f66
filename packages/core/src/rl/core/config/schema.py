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
from rl.core.config.rollout import RolloutConfig
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
    Checked,
    above,
    between,
    check_fields,
    optional,
    require,
    setting,
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


def cpu_vllm_kv_rows(config: Any) -> int:
    """The full-length rows of KV cache rl.rollout's vLLM reserves on CPU (and `rl plan`
    counts): one generation's, its prompts (`data.gen_batch_size`, else
    `data.train_batch_size`) x `rollout.n`, at most `rollout.max_num_seqs`; a larger
    batch (validation) runs in waves."""
    data, rollout = config.data, config.rollout
    prompts = data.gen_batch_size or data.train_batch_size
    return int(min(rollout.max_num_seqs, prompts * rollout.n))


@dataclass(frozen=True)
class TinyModelConfig:
    """A small Qwen2-architecture model built from a config with random weights."""

    hidden_size: int = setting(128, POSITIVE_INT)
    num_hidden_layers: int = setting(2, POSITIVE_INT)
    num_attention_heads: int = setting(2, POSITIVE_INT)
    num_key_value_heads: int = 1
    intermediate_size: int = setting(256, POSITIVE_INT)

    def __post_init__(self) -> None:
        check_fields(self)
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
    # a Hugging Face folder, or the built-in demo model
    path: str = setting("builtin:tiny-qwen2", NOT_EMPTY)
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    tiny: TinyModelConfig = field(default_factory=TinyModelConfig)
    gradient_checkpointing: bool = False
    trust_remote_code: bool = False  # run the Python code a model folder ships (verl's name)
    # the tokenizer's folder or Hub id when model.path has none (verl's
    # actor_rollout_ref.model.tokenizer_path); None: model.path's
    tokenizer_path: str | None = setting(None, optional(NOT_EMPTY))
    # a Jinja chat template used instead of the tokenizer's own (verl's name)
    custom_chat_template: str | None = setting(None, optional(NOT_EMPTY))
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
        check_fields(self)
        check_lora(self)


@dataclass(frozen=True)
class DataConfig(Checked):
    train_files: tuple[str, ...] = setting(("builtin:arithmetic",), FILES)
    val_files: tuple[str, ...] = free(("builtin:arithmetic",), FILES)
    prompt_key: str = setting("prompt", NOT_EMPTY)
    answer_key: str = setting("answer", NOT_EMPTY)
    data_source_key: str = setting("data_source", NOT_EMPTY)
    # a row's reward domain (reward.domains): this column, else the domain whose
    # tag_included lists its data_source_key value, else default_domain (ROLL: math_rule)
    domain_key: str = setting("domain", NOT_EMPTY)
    default_domain: str | None = setting(None, optional(NOT_EMPTY))
    # a fixed share of each batch's prompts per domain (ROLL's data_args key): int(p * size)
    # prompts for each domain but the last, which takes the rest; empty: one mixed sampler
    domain_interleave_probs: dict[str, float] = field(default_factory=dict)
    # whole conversations (verl's multi-turn SFT `messages_key`): each row's messages up to
    # the first assistant turn are its prompt, the rest its SFT demonstration (assistant turns
    # learned, the others read); null: prompt and answer columns
    messages_key: str | None = None
    # auto: chat messages through the tokenizer's chat template (as verl), text as it is;
    # native: text too, as one user message; none: messages' contents joined by newlines
    chat_template: Literal["auto", "native", "none"] = "auto"
    apply_chat_template_kwargs: dict[str, Any] = field(default_factory=dict)  # enable_thinking
    # a vision-language model's rows: the column of each row's images (verl's data.image_key)
    image_key: str = setting("images", NOT_EMPTY)
    # the pixel bounds images are resized within (ROLL's data_args names); null: those of
    # the model folder's preprocessor_config.json (verl's: it reads them there)
    image_min_pixels: int | None = setting(None, optional(POSITIVE_INT))
    image_max_pixels: int | None = setting(None, optional(POSITIVE_INT))
    max_prompt_length: int = setting(32, POSITIVE_INT)
    max_response_length: int = setting(8, POSITIVE_INT)
    truncation: Literal["error", "left", "right"] = "error"
    filter_overlong_prompts: bool = False
    filter_num_workers: int = free(1, POSITIVE_INT)
    train_batch_size: int = setting(16, POSITIVE_INT)
    # prompts per generation (dynamic sampling); null: train_batch_size
    gen_batch_size: int | None = setting(None, optional(POSITIVE_INT))
    val_batch_size: int = free(64, POSITIVE_INT)
    shuffle: bool = True
    seed: int = setting(1, SEED)
    builtin_train_size: int = setting(2000, POSITIVE_INT)
    builtin_val_size: int = free(64, POSITIVE_INT)
    builtin_max_operand: int = setting(9, NON_NEGATIVE)

    @property
    def builtin_train(self) -> bool:
        """Training prompts generated in code (the demo task), not read from files."""
        from rl.core.demo import is_builtin

        return is_builtin(self.train_files)


@dataclass(frozen=True)
class OptimConfig(Checked):
    lr: float = setting(1e-5, POSITIVE)
    weight_decay: float = setting(0.0, NON_NEGATIVE)
    betas: tuple[float, ...] = setting((0.9, 0.999), BETAS)
    # Adam's denominator term (verl's `eps`; RLinf adam_eps, ROLL adam_epsilon)
    eps: float = setting(1e-8, POSITIVE)
    lr_scheduler: Literal["constant", "cosine", "linear", "wsd"] = "constant"
    lr_warmup_steps: int = setting(0, NON_NEGATIVE)
    lr_warmup_ratio: float = setting(0.0, FRACTION)
    min_lr_ratio: float = setting(0.0, PROBABILITY)
    wsd_decay_ratio: float = setting(0.1, PROBABILITY)
    grad_clip: float = setting(1.0, POSITIVE)
    # the megatron engine's schedule (megatron-core's OptimizerParamScheduler; verl's
    # megatron optim keys): warmup from this LR, decay over this many steps (null: all),
    # WSD's decay shape, weight decay constant or rising, and whether a resumed run keeps
    # the checkpoint's schedule settings over the config's
    lr_warmup_init: float = setting(0.0, NON_NEGATIVE)
    lr_decay_steps: int | None = setting(None, optional(POSITIVE_INT))
    lr_wsd_decay_style: Literal["linear", "cosine", "exponential", "minus_sqrt"] = "linear"
    weight_decay_incr_style: Literal["constant", "linear", "cosine"] = "constant"
    use_checkpoint_opt_param_scheduler: bool = False


@dataclass(frozen=True)
class ActorConfig(Checked, HasBackendSections):
    # the train engine, found through the rl.engines registry
    strategy: str = setting("fsdp", NOT_EMPTY)
    optim: OptimConfig = field(default_factory=OptimConfig)
    # prompts per optimizer step (× rollout.n responses)
    # a vision-language policy's vision tower (and merger) kept as loaded: verl's key
    freeze_vision_tower: bool = False
    ppo_mini_batch_size: int = setting(8, POSITIVE_INT)
    ppo_micro_batch_size_per_gpu: int = free(16, POSITIVE_INT)  # responses per forward/backward
    ppo_epochs: int = setting(1, POSITIVE_INT)
    shuffle: bool = False
    policy_loss: str = "vanilla"
    loss_agg_mode: str = "token-mean"
    # fixed normaliser of token-sum / seq-mean-token-sum-norm (null: 1 / the response length)
    loss_scale_factor: float | None = setting(None, optional(POSITIVE))
    clip_ratio: float = setting(0.2, between(0, 1, open_low=True, open_high=True))
    clip_ratio_low: float | None = setting(None, optional(FRACTION))
    clip_ratio_high: float | None = setting(None, optional(POSITIVE))
    # null: no dual clip (ROLL's and RLinf's off switch)
    clip_ratio_c: float | None = setting(3.0, optional(above(1)))
    # ChatLearn's final_clip_ratio: each token's clipped policy loss is at most this,
    # whatever the advantage's sign (vanilla and gspo; null: off)
    policy_loss_cap: float | None = setting(None, optional(POSITIVE))
    entropy_coeff: float = 0.0
    use_kl_loss: bool = False
    kl_loss_coef: float = setting(0.001, NON_NEGATIVE)
    kl_loss_type: str = "low_var_kl"
    # RLinf: drop tokens whose ratio exceeds it
    early_stop_imp_ratio: float | None = setting(None, optional(POSITIVE))
    use_valid_token_scale: bool = False  # RLinf
    # truncated IS vs rollout log-probs (None: off); the simple case of
    # algorithm.rollout_correction (rollout_is: token, rollout_is_threshold: tis_cap)
    tis_cap: float | None = setting(None, optional(POSITIVE))
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
    ppo_max_token_len_per_gpu: int = free(16384, POSITIVE_INT)
    # the train backends' own sections, by their keys (`actor.fsdp_config`, `actor.megatron`;
    # also the reference's): rl.core.config.sections
    backends: dict[str, Any] = field(default_factory=default_sections)
    # Ulysses: ranks that split each packed row (attention heads over an all-to-all)
    ulysses_sequence_parallel_size: int = setting(1, POSITIVE_INT)
    # MoE routing replay (verl's router_replay.mode: disabled | R2 | R3)
    router_replay: RouterReplayConfig = field(default_factory=RouterReplayConfig)


@dataclass(frozen=True)
class CriticConfig(Checked, HasBackendSections):
    strategy: str = setting("fsdp", NOT_EMPTY)
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=1e-4))
    ppo_mini_batch_size: int = setting(8, POSITIVE_INT)
    ppo_micro_batch_size_per_gpu: int = free(16, POSITIVE_INT)
    ppo_epochs: int = setting(1, POSITIVE_INT)
    cliprange_value: float = setting(0.5, POSITIVE)
    loss_agg_mode: str = "token-mean"
    loss_scale_factor: float | None = setting(None, optional(POSITIVE))
    use_remove_padding: bool = True
    use_prefix_grouper: bool | None = None  # as the actor's
    use_dynamic_bsz: bool = free(False)
    ppo_max_token_len_per_gpu: int = free(32768, POSITIVE_INT)
    forward_max_token_len_per_gpu: int = free(32768, POSITIVE_INT)  # compute_values (no gradients)
    backends: dict[str, Any] = field(default_factory=default_sections)  # as the actor's
    ulysses_sequence_parallel_size: int = setting(1, POSITIVE_INT)


@dataclass(frozen=True)
class RefConfig(Checked):
    """The reference policy's log-prob pass (the model is the actor's)."""

    log_prob_micro_batch_size_per_gpu: int = free(16, POSITIVE_INT)
    log_prob_use_dynamic_bsz: bool = free(False)
    log_prob_max_token_len_per_gpu: int = free(16384, POSITIVE_INT)


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
        self._check_async_reward()
        self._check_batch_invariant()
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

    def _check_batch_invariant(self) -> None:
        """The batch-invariant ops are built into the HF rollout engine and the FSDP trainer
        on CPU, for attention within whole sequences on one rank (no Ulysses split) and
        plain linear layers (no LoRA adapters yet)."""
        if not self.rollout.batch_invariant:
            return
        actor, sp = self.actor, self.actor.ulysses_sequence_parallel_size
        for key, value, fine, allowed in (
            ("rollout.name", self.rollout.name, self.rollout.name == "hf", "hf"),
            ("trainer.device", self.trainer.device, self.trainer.device == "cpu", "cpu"),
            ("actor.strategy", actor.strategy, actor.strategy == "fsdp", "fsdp"),
            ("model.lora_rank", self.model.lora_rank, self.model.lora_rank == 0, "0"),
            ("actor.ulysses_sequence_parallel_size", sp, sp == 1, "1"),
        ):
            require(
                fine,
                key,
                value,
                f"{allowed} with rollout.batch_invariant = true (its batch-invariant ops are "
                "built and verified for the HF rollout engine and the FSDP trainer on CPU, "
                "without Ulysses or LoRA adapters yet)",
            )

    def _check_async_reward(self) -> None:
        """Background scoring needs the pool (its timeout works off the main thread) and
        something to overlap: dynamic sampling filters on the scores first. Scoring while
        generating runs in the synchronous step of single-turn rollouts."""
        reward = self.reward
        if reward.stream_chunks > 1:
            key, value = "reward.stream_chunks", reward.stream_chunks
            require(
                reward.num_workers > 0,
                "reward.num_workers",
                reward.num_workers,
                f">= 1 with {key} (scoring off the main thread runs in the pool, which "
                "enforces reward.timeout_s)",
            )
            require(
                not self.algorithm.filter_groups.enable,
                key,
                value,
                "0 with algorithm.filter_groups.enable (the groups are filtered on their "
                "scores before any log-prob pass)",
            )
            require(
                self.trainer.mode == "sync",
                key,
                value,
                f"0 with trainer.mode {self.trainer.mode} (it streams in the synchronous step)",
            )
            require(
                not self.rollout.multi_turn.enable,
                key,
                value,
                "0 with rollout.multi_turn.enable (an agent's turns are not chunked yet)",
            )
        if not reward.launch_reward_fn_async:
            return
        require(
            reward.num_workers > 0,
            "reward.num_workers",
            reward.num_workers,
            ">= 1 with reward.launch_reward_fn_async (scoring off the main thread runs in "
            "the pool, which enforces reward.timeout_s)",
        )
        require(
            not self.algorithm.filter_groups.enable,
            "reward.launch_reward_fn_async",
            True,
            "false with algorithm.filter_groups.enable (the groups are filtered on their "
            "scores before any log-prob pass: nothing to overlap)",
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
