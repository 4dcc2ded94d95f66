"""The configuration schema: one frozen dataclass per section.

Key names follow verl where the seed systems agree (actor.ppo_mini_batch_size,
algorithm.adv_estimator, ...). Every value is checked when the config is built;
an error names the key, the value and what is allowed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from rl.core.algorithms.rollout_correction import RolloutCorrectionConfig
from rl.core.config.errors import ConfigError


def _check(condition: bool, key: str, value: object, allowed: str) -> None:
    if not condition:
        raise ConfigError(f"{key} = {value!r} is not allowed: {allowed}")


@dataclass(frozen=True)
class TinyModelConfig:
    """A small Qwen2-architecture model built from a config with random weights."""

    hidden_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    num_key_value_heads: int = 1
    intermediate_size: int = 256

    def __post_init__(self) -> None:
        head_dim, rest = divmod(self.hidden_size, self.num_attention_heads)
        _check(
            rest == 0 and head_dim in (32, 64, 128, 256),
            "model.tiny.hidden_size",
            self.hidden_size,
            "hidden_size / num_attention_heads must be 32, 64, 128 or 256 "
            "(the head dims vLLM's CPU build serves)",
        )


@dataclass(frozen=True)
class ModelConfig:
    path: str = "builtin:tiny-qwen2"  # a Hugging Face folder, or the built-in demo model
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    tiny: TinyModelConfig = field(default_factory=TinyModelConfig)
    gradient_checkpointing: bool = False
    trust_remote_code: bool = False


@dataclass(frozen=True)
class DataConfig:
    train_files: tuple[str, ...] = ("builtin:arithmetic",)
    val_files: tuple[str, ...] = ("builtin:arithmetic",)
    prompt_key: str = "prompt"
    answer_key: str = "answer"
    data_source_key: str = "data_source"
    chat_template: Literal["native", "none"] = "none"
    max_prompt_length: int = 32
    max_response_length: int = 8
    truncation: Literal["error", "left", "right"] = "error"
    filter_overlong_prompts: bool = False
    filter_num_workers: int = 1
    train_batch_size: int = 16
    val_batch_size: int = 64
    shuffle: bool = True
    seed: int = 1
    builtin_train_size: int = 2000
    builtin_val_size: int = 64
    builtin_max_operand: int = 9

    def __post_init__(self) -> None:
        _check(self.train_batch_size >= 1, "data.train_batch_size", self.train_batch_size, ">= 1")
        _check(
            self.max_prompt_length >= 1, "data.max_prompt_length", self.max_prompt_length, ">= 1"
        )
        _check(
            self.max_response_length >= 1,
            "data.max_response_length",
            self.max_response_length,
            ">= 1",
        )


@dataclass(frozen=True)
class OptimConfig:
    lr: float = 1e-5
    weight_decay: float = 0.0
    betas: tuple[float, ...] = (0.9, 0.999)
    lr_scheduler: Literal["constant", "cosine", "linear", "wsd"] = "constant"
    lr_warmup_steps: int = 0
    lr_warmup_ratio: float = 0.0
    min_lr_ratio: float = 0.0
    wsd_decay_ratio: float = 0.1
    grad_clip: float = 1.0

    def __post_init__(self) -> None:
        _check(self.lr > 0, "optim.lr", self.lr, "> 0")
        _check(
            0 <= self.lr_warmup_ratio < 1,
            "optim.lr_warmup_ratio",
            self.lr_warmup_ratio,
            "in [0, 1)",
        )
        _check(0 <= self.min_lr_ratio <= 1, "optim.min_lr_ratio", self.min_lr_ratio, "in [0, 1]")


@dataclass(frozen=True)
class ActorConfig:
    strategy: str = "fsdp"  # the train engine, found through the rl.engines registry
    optim: OptimConfig = field(default_factory=OptimConfig)
    ppo_mini_batch_size: int = 8  # prompts per optimizer step (× rollout.n responses)
    ppo_micro_batch_size_per_gpu: int = 16  # responses per forward/backward
    ppo_epochs: int = 1
    shuffle: bool = False
    policy_loss: str = "vanilla"
    loss_agg_mode: str = "token-mean"
    # fixed normaliser of token-sum / seq-mean-token-sum-norm (null: 1 / the response length)
    loss_scale_factor: float | None = None
    clip_ratio: float = 0.2
    clip_ratio_low: float | None = None
    clip_ratio_high: float | None = None
    clip_ratio_c: float = 3.0
    entropy_coeff: float = 0.0
    use_kl_loss: bool = False
    kl_loss_coef: float = 0.001
    kl_loss_type: str = "low_var_kl"
    early_stop_imp_ratio: float | None = None  # RLinf: drop tokens whose ratio exceeds it
    use_valid_token_scale: bool = False  # RLinf
    # truncated IS vs rollout log-probs (None: off); the simple case of
    # algorithm.rollout_correction (rollout_is: token, rollout_is_threshold: tis_cap)
    tis_cap: float | None = None
    # rl.kernels.fused_logprob_entropy; null = auto (no-grad passes everywhere, training on GPU)
    use_fused_kernels: bool | None = None

    def __post_init__(self) -> None:
        _check(
            self.ppo_mini_batch_size >= 1,
            "actor.ppo_mini_batch_size",
            self.ppo_mini_batch_size,
            ">= 1",
        )
        _check(
            self.ppo_micro_batch_size_per_gpu >= 1,
            "actor.ppo_micro_batch_size_per_gpu",
            self.ppo_micro_batch_size_per_gpu,
            ">= 1",
        )
        _check(self.ppo_epochs >= 1, "actor.ppo_epochs", self.ppo_epochs, ">= 1")
        _check(self.clip_ratio > 0, "actor.clip_ratio", self.clip_ratio, "> 0")


@dataclass(frozen=True)
class CriticConfig:
    strategy: str = "fsdp"
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=1e-4))
    ppo_mini_batch_size: int = 8
    ppo_micro_batch_size_per_gpu: int = 16
    ppo_epochs: int = 1
    cliprange_value: float = 0.5
    loss_agg_mode: str = "token-mean"
    loss_scale_factor: float | None = None


@dataclass(frozen=True)
class ValKwargs:
    """Sampling for validation: greedy by default."""

    n: int = 1
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = -1


@dataclass(frozen=True)
class RolloutConfig:
    name: str = "hf"
    n: int = 4
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    min_new_tokens: int = 0
    val_kwargs: ValKwargs = field(default_factory=ValKwargs)

    def __post_init__(self) -> None:
        _check(self.n >= 1, "rollout.n", self.n, ">= 1")
        _check(self.temperature >= 0, "rollout.temperature", self.temperature, ">= 0")
        _check(0 < self.top_p <= 1, "rollout.top_p", self.top_p, "in (0, 1]")


@dataclass(frozen=True)
class CustomRewardConfig:
    path: str | None = None
    name: str = "compute_score"


@dataclass(frozen=True)
class RewardModelConfig:
    """A sequence-classification reward model (one output) instead of rule-based scores."""

    path: str | None = None
    batch_size: int = 16
    max_length: int = 2048


@dataclass(frozen=True)
class RewardConfig:
    custom_reward_function: CustomRewardConfig = field(default_factory=CustomRewardConfig)
    reward_model: RewardModelConfig = field(default_factory=RewardModelConfig)
    reward_scale: float | None = None
    num_workers: int = 0
    timeout_s: float = 10.0
    # stop the run when more than this share of responses fail to score (errors, non-finite
    # or wrong-typed results, timeouts) over the last `error_rate_window` scoring calls;
    # 1.0 never stops
    max_error_rate: float = 0.5
    error_rate_window: int = 5


@dataclass(frozen=True)
class KLControlConfig:
    type: Literal["fixed", "adaptive"] = "fixed"
    kl_coef: float = 0.001
    target_kl: float = 0.1
    horizon: int = 10000


@dataclass(frozen=True)
class AlgorithmConfig:
    adv_estimator: str = "grpo"
    gamma: float = 1.0
    lam: float = 1.0
    norm_adv_by_std_in_grpo: bool = True
    use_kl_in_reward: bool = False
    kl_penalty: str = "kl"
    kl_ctrl: KLControlConfig = field(default_factory=KLControlConfig)
    # IS weights / rejection sampling / veto against the rollout engine's log-probs
    rollout_correction: RolloutCorrectionConfig = field(default_factory=RolloutCorrectionConfig)


@dataclass(frozen=True)
class SFTConfig:
    """Supervised warm-start (`rl sft`, and `enable` before RL in `rl train`)."""

    enable: bool = False
    steps: int = 0
    batch_size: int = 32
    lr: float = 1e-3


@dataclass(frozen=True)
class TrainerConfig:
    project_name: str = "rl"
    experiment_name: str = "demo"
    output_dir: str = "outputs/demo"
    device: Literal["cpu", "cuda"] = "cpu"
    seed: int = 1
    total_epochs: int = 1
    total_training_steps: int | None = None
    val_before_train: bool = True
    test_freq: int = 5
    save_freq: int = -1
    max_ckpt_to_keep: int | None = 2
    # stop when this many steps in a row skip their update (non-finite gradients)
    max_skipped_steps: int = 5
    resume_mode: Literal["auto", "disable", "path"] = "auto"
    resume_from_path: str | None = None
    logger: tuple[str, ...] = ("console", "jsonl")
    log_val_generations: int = 4
    progress_bar: bool = True

    def __post_init__(self) -> None:
        _check(self.total_epochs >= 1, "trainer.total_epochs", self.total_epochs, ">= 1")
        if self.resume_mode == "path" and not self.resume_from_path:
            raise ConfigError("trainer.resume_mode = 'path' needs trainer.resume_from_path")
        allowed = {"console", "jsonl", "tensorboard", "wandb", "mlflow"}
        for name in self.logger:
            _check(name in allowed, "trainer.logger", name, f"one of {sorted(allowed)}")


@dataclass(frozen=True)
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    actor: ActorConfig = field(default_factory=ActorConfig)
    critic: CriticConfig = field(default_factory=CriticConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)

    def __post_init__(self) -> None:
        if self.data.train_batch_size % self.actor.ppo_mini_batch_size:
            raise ConfigError(
                f"data.train_batch_size ({self.data.train_batch_size}) must be a multiple of "
                f"actor.ppo_mini_batch_size ({self.actor.ppo_mini_batch_size})"
            )

    @property
    def uses_critic(self) -> bool:
        return self.algorithm.adv_estimator == "gae"

    @property
    def uses_reference(self) -> bool:
        return self.actor.use_kl_loss or self.algorithm.use_kl_in_reward
