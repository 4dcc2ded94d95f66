"""Each RLinf setting that changes what is trained, flipped on RLinf's own GRPO file: our
config changes as RLinf's code computes it (rlinf/algorithms, the actor workers), or the
key is refused by name with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl.cli.dialects import convert
from rl.core.config import config_from_mapping

MATH = Path(__file__).parent / "rlinf" / "upstream" / "examples" / "reasoning" / "config" / "math"
MEGATRON = MATH / "qwen2.5-1.5b-grpo-megatron.yaml"
FSDP = MATH / "qwen2.5-1.5b-grpo-fsdp.yaml"
# what the megatron file is refused over, set as rl does it, so that a flip shows alone
CLEAN = [
    "actor.optim.fp16=false",
    "actor.optim.bf16=true",
    "actor.model.precision=bf16",
]


def run(*overrides: str, path: Path = MEGATRON):
    """(our config, {refused key: reason}) of `path` with CLEAN and `overrides`."""
    conversion = convert("rlinf", path, [*CLEAN, *overrides] if path == MEGATRON else overrides)
    refused = {e.source: e.reason for e in conversion.report.refused()}
    return config_from_mapping(conversion.config, "converted"), refused


def test_the_clean_file_converts():
    config, refused = run()
    assert refused == {}
    assert config.algorithm.adv_estimator == "grpo" and config.algorithm.norm_adv_by_std_in_grpo
    assert config.model.dtype == "bfloat16"


def test_adv_type():
    config, refused = run("algorithm.adv_type=reinpp")
    assert config.algorithm.adv_estimator == "reinforce_plus_plus" and not refused
    config, refused = run("algorithm.adv_type=reinpp", "+algorithm.use_reinpp_baseline=true")
    assert config.algorithm.adv_estimator == "reinforce_plus_plus_baseline" and not refused
    _, refused = run("algorithm.adv_type=gae")
    assert "last padded position" in refused["algorithm.adv_type"]
    _, refused = run("algorithm.adv_type=grpo_dynamic")
    assert "grpo_dynamic" in refused["algorithm.adv_type"]


def test_normalize_advantages():
    """RLinf whitens the step's advantages after any estimator (population std + 1e-5):
    rl's whiten_advantages in RLinf's style, also after reinpp's own whitening, as RLinf."""
    config, refused = run("algorithm.normalize_advantages=true")
    assert not refused and config.algorithm.adv_estimator == "grpo"
    assert config.algorithm.whiten_advantages and config.algorithm.whiten_style == "rlinf"
    config, refused = run("algorithm.normalize_advantages=true", "algorithm.adv_type=reinpp")
    assert not refused and config.algorithm.adv_estimator == "reinforce_plus_plus"
    assert config.algorithm.whiten_advantages
    off, _ = run("algorithm.normalize_advantages=false")
    assert not off.algorithm.whiten_advantages and off.algorithm.whiten_style == "roll"
    # the FSDP actor on devices of its own whitens each mini-batch apart: refused past one
    pipelined = [
        "~cluster.component_placement",
        "+cluster.component_placement.rollout=0-3",
        "+cluster.component_placement.actor=4-7",
        "algorithm.normalize_advantages=true",
    ]
    _, refused = run(*pipelined, "algorithm.n_minibatches=2", path=FSDP)
    assert "each mini-batch apart" in refused["algorithm.normalize_advantages"]
    _, refused = run(*pipelined, "algorithm.n_minibatches=1", path=FSDP)
    assert "algorithm.normalize_advantages" not in refused


def test_loss_type_and_aggregation():
    _, refused = run("algorithm.loss_type=decoupled_actor_critic")
    assert "loss_type" in refused["algorithm.loss_type"]
    # one sequence per micro-batch: RLinf's token-mean is the mean of sequence means
    config, _ = run()
    assert config.actor.loss_agg_mode == "seq-mean-token-mean"
    config, _ = run("algorithm.loss_agg_func=seq-mean-token-sum")
    assert config.actor.loss_agg_mode == "seq-mean-token-sum"
    _, refused = run("algorithm.training_batch_size_per_gpu=4")
    assert "each micro-batch" in refused["algorithm.loss_agg_func"]


def test_clip_ratios():
    config, _ = run("algorithm.ratio_clip_eps=0.1", "algorithm.clip_ratio_low=0.15")
    assert config.actor.clip_ratio == 0.1 and config.actor.clip_ratio_low == 0.15
    config, _ = run("algorithm.clip_ratio_high=0.28")
    assert config.actor.clip_ratio_high == 0.28
    config, _ = run("algorithm.clip_ratio_c=null")
    assert config.actor.clip_ratio_c is None
    config, _ = run("algorithm.clip_ratio_c=10.0")
    assert config.actor.clip_ratio_c == 10.0


def test_kl_loss():
    config, refused = run("algorithm.kl_beta=0.0")
    assert not config.actor.use_kl_loss and not refused
    # RLinf's loss calls kl_penalty(ref, logprobs): k3 and k1 are ours swapped
    _, refused = run("algorithm.kl_beta=0.01", "algorithm.kl_penalty_type=low_var_kl")
    assert "swapped" in refused["algorithm.kl_penalty_type"]
    config, refused = run("algorithm.kl_beta=0.01", "algorithm.kl_penalty_type=mse")
    assert not refused
    assert config.actor.use_kl_loss and config.actor.kl_loss_coef == 0.01
    assert config.actor.kl_loss_type == "mse"


def test_entropy_bonus_applies_only_while_entropy_is_calculated():
    config, _ = run("algorithm.entropy_bonus=0.01", "algorithm.calculate_entropy=false")
    assert config.actor.entropy_coeff == 0.0
    config, _ = run("algorithm.entropy_bonus=0.01", "algorithm.calculate_entropy=true")
    assert config.actor.entropy_coeff == 0.01


def test_valid_token_scale_and_importance_sampling():
    config, _ = run("algorithm.use_valid_token_scale=true")
    assert config.actor.use_valid_token_scale
    config, _ = run(
        "+algorithm.importance_sampling_fix=true", "+algorithm.importance_sampling_clip=2.0"
    )
    assert config.actor.tis_cap == 2.0
    config, _ = run(
        "+algorithm.importance_sampling_fix=false", "+algorithm.importance_sampling_clip=2.0"
    )
    assert config.actor.tis_cap is None


def test_precision():
    config, _ = run("actor.model.precision=fp16", "actor.optim.loss_scale=null")
    assert config.model.dtype == "float16" and config.rollout.dtype == "float16"
    config, _ = run("actor.model.precision=fp32")
    assert config.model.dtype == "float32"
    # megatron's static loss scale under fp16: megatron's own OptimizerConfig field
    config, refused = run(
        "actor.model.precision=fp16", "actor.optim.fp16=true", "actor.optim.bf16=false"
    )
    assert not refused and config.model.dtype == "float16"
    assert config.actor.megatron.override_optimizer_config == {"loss_scale": 65536}
    _, refused = run("actor.model.precision=fp32", "actor.optim.bf16=true")
    assert "against model.precision" in refused["actor.optim.bf16"]
    # FSDP: autocast beside FSDP's own fp16 mixed precision is refused, as RLinf does
    _, refused = run(path=FSDP)
    assert set(refused) == {"actor.fsdp_config.amp_autocast.enabled"}
    assert "RLinf refuses the pair" in refused["actor.fsdp_config.amp_autocast.enabled"]


def test_fp16_autocast_and_the_gradient_scaler_map_to_the_fsdp_engines():
    no_mixed = [
        f"actor.fsdp_config.mixed_precision.{key}=null"
        for key in ("param_dtype", "reduce_dtype", "buffer_dtype")
    ]
    config, refused = run(
        *no_mixed,
        "+actor.fsdp_config.grad_scaler.init_scale=1024",
        "+actor.fsdp_config.grad_scaler.growth_interval=50",
        path=FSDP,
    )
    assert not refused
    fsdp = config.actor.fsdp_config
    assert fsdp.amp_autocast.enabled and fsdp.amp_autocast.precision == "float16"
    assert fsdp.grad_scaler.enabled and fsdp.grad_scaler.init_scale == 1024
    assert fsdp.grad_scaler.growth_interval == 50
    assert fsdp.mixed_precision.param_dtype == "float32"
    off, _ = run(
        *no_mixed,
        "actor.fsdp_config.amp_autocast.enabled=false",
        "actor.fsdp_config.grad_scaler.enabled=false",
        path=FSDP,
    )
    assert not off.actor.fsdp_config.amp_autocast.enabled
    assert not off.actor.fsdp_config.grad_scaler.enabled


def test_lora_is_refused():
    _, refused = run("+actor.model.is_lora=true", "+actor.model.lora_rank=32")
    assert "LoRA" in refused["actor.model.is_lora"] and set(refused) == {"actor.model.is_lora"}


def test_dynamic_scheduling_is_refused_and_pipeline_placement_maps():
    _, refused = run("+cluster.auto_scheduler=true")
    assert "dynamic scheduler" in refused["cluster.auto_scheduler"]
    config, refused = run(
        "~cluster.component_placement",
        "+cluster.component_placement.rollout=0-3",
        "+cluster.component_placement.actor=4-7",
        "+cluster.component_placement.reward=0-3",
    )
    assert not refused and config.trainer.mode == "sync"  # RLinf syncs weights every step
    assert config.cluster.component_placement["actor"] == "4-7"


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ([], {"lr_scheduler": "constant", "lr_decay_steps": 10, "lr_warmup_steps": 0}),
        (
            [
                "actor.lr_sched.lr_decay_style=cosine",
                "actor.lr_sched.lr_warmup_iters=5",
                "actor.lr_sched.lr_decay_iters=100",
                "actor.lr_sched.min_lr=1e-7",
                "actor.lr_sched.lr_warmup_init=1e-8",
            ],
            {
                "lr_scheduler": "cosine",
                "lr_warmup_steps": 5,
                "lr_decay_steps": 100,
                "min_lr_ratio": pytest.approx(1e-7 / 2e-5),
                "lr_warmup_init": 1e-8,
            },
        ),
    ],
)
def test_lr_schedule(overrides, expected):
    config, refused = run(*overrides)
    assert not refused
    assert config.actor.optim.lr == 2e-5
    for key, value in expected.items():
        assert getattr(config.actor.optim, key) == value, key


def test_adams_eps_reaches_our_optimizer():
    """RLinf's `optim.adam_eps` is the eps of its Adam (torch AdamW on FSDP, megatron's
    adam_eps): ours is `optim.eps`, which both engines pass to theirs."""
    config, refused = run()
    assert not refused and config.actor.optim.eps == 1e-5  # the file's value
    config, _ = run("actor.optim.adam_eps=1e-6")
    assert config.actor.optim.eps == 1e-6
