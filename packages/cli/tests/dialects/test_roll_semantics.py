"""Each ROLL setting that changes what is trained, flipped: the conversion follows ROLL's
formula (roll/utils/functionals.py, roll/pipeline/rlvr/actor_worker.py at 8eb27cc2) or the
key is refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl.cli.dialects import convert
from rl.core.config import config_from_mapping

BASE = """
pretrain: /models/Qwen2.5-0.5B
rollout_batch_size: 4
num_return_sequences_in_group: 2
prompt_length: 64
response_length: 64
adv_estimator: reinforce
actor_train:
  training_args: {per_device_train_batch_size: 2, gradient_accumulation_steps: 1}
  data_args: {template: qwen2_5, file_name: [data/train.jsonl], messages: messages}
  strategy_args: {strategy_name: fsdp2_train}
actor_infer:
  strategy_args: {strategy_name: hf_infer}
"""


@pytest.fixture
def file(tmp_path: Path) -> Path:
    path = tmp_path / "rlvr_config.yaml"
    path.write_text(BASE)
    return path


def run(file: Path, *overrides: str):
    conversion = convert("roll", file, list(overrides))
    by_key = {e.source: e for e in conversion.report.entries}
    refused = {k for k, e in by_key.items() if e.status == "unsupported"}
    config = config_from_mapping(conversion.config, "converted")
    return config, refused, by_key


def test_reinforce_without_normalisation_is_rls_reinforce_not_grpo(file):
    config, refused, _ = run(file)
    assert config.algorithm.adv_estimator == "reinforce" and not refused
    assert not config.algorithm.whiten_advantages  # ROLL's default: off


@pytest.mark.parametrize(
    ("overrides", "estimator", "by_std"),
    [
        (["adv_estimator=grpo"], "grpo", True),  # ROLL forces group mean / group std
        (["+norm_mean_type=group", "+norm_std_type=group"], "grpo", True),
        (["+norm_mean_type=group"], "grpo", False),  # no std: Dr.GRPO
    ],
)
def test_group_normalisation_is_grpo(file, overrides, estimator, by_std):
    config, refused, _ = run(file, *overrides)
    assert not refused
    assert config.algorithm.adv_estimator == estimator
    assert config.algorithm.norm_adv_by_std_in_grpo is by_std


@pytest.mark.parametrize(
    ("overrides", "refused_key"),
    [
        (["+norm_mean_type=batch"], "adv_estimator"),
        (["+norm_std_type=running"], "norm_std_type"),
        (["adv_estimator=grpo", "+gamma=0.9"], "adv_estimator"),
        (["adv_estimator=grpo", "+add_token_level_kl=true"], "adv_estimator"),
        (["adv_estimator=grpo", "+reward_clip=0.5"], "reward_clip"),  # it binds
        (["adv_estimator=grpo", "+whiten_rewards=true"], "whiten_rewards"),
        (["adv_estimator=gigpo"], "adv_estimator"),
        (["adv_estimator=step_reinforce"], "adv_estimator"),
        (["adv_estimator=gae"], "adv_estimator"),  # unwhitened GAE: rl's gae whitens
    ],
)
def test_what_rl_cannot_compute_as_roll_does_is_refused_by_name(file, overrides, refused_key):
    _, refused, _ = run(file, *overrides)
    assert refused_key in refused


def test_gae_with_whitening_is_rls_gae(file):
    critic = "+critic={training_args: {per_device_train_batch_size: 2}}"
    config, refused, _ = run(file, "adv_estimator=gae", "+whiten_advantages=true", critic)
    assert not refused and config.algorithm.adv_estimator == "gae"
    assert not config.algorithm.whiten_advantages  # rl's gae whitens itself, once


@pytest.mark.parametrize(
    ("override", "check"),
    [
        ("+whiten_advantages=true", lambda c: c.algorithm.whiten_advantages),
        ("+whiten_rewards=true", lambda c: c.algorithm.whiten_rewards),
        ("+reward_clip=10", lambda c: c.algorithm.reward_clip == 10),
        ("+advantage_clip=2.0", lambda c: c.algorithm.advantage_clip == 2.0),
        ("+add_token_level_kl=true", lambda c: c.algorithm.use_kl_in_reward),
        ("+dual_clip_loss=true", lambda c: c.actor.clip_ratio_c == pytest.approx(1.4)),
        ("+loss_agg_mode=token-mean", lambda c: c.actor.loss_agg_mode == "token-mean"),
        (
            "+use_pg_clip_range=true",
            lambda c: (c.actor.clip_ratio_low, c.actor.clip_ratio_high) == (0.2, 0.2),
        ),
        ("+actor_train.model_args.dtype=fp16", lambda c: c.model.dtype == "float16"),
        ("+actor_train.model_args.dtype=fp32", lambda c: c.model.dtype == "float32"),
    ],
)
def test_each_setting_flipped_changes_the_conversion(file, override, check):
    base, _, _ = run(file)
    config, refused, _ = run(file, override)
    assert not refused and check(config) and config != base


def test_a_zero_reward_clip_is_off_as_in_roll(file):
    config, refused, _ = run(file, "+reward_clip=0")  # ROLL: `if reward_clip:`
    assert not refused and config.algorithm.reward_clip is None


def test_clip_range_low_high_only_with_use_pg_clip_range(file):
    config, _, _ = run(file, "+pg_clip_low=0.1", "+pg_clip_high=0.3")
    assert config.actor.clip_ratio_low is None  # ROLL reads them only with the switch on
    config, _, _ = run(file, "+use_pg_clip_range=true", "+pg_clip_low=0.1", "+pg_clip_high=0.3")
    assert (config.actor.clip_ratio_low, config.actor.clip_ratio_high) == (0.1, 0.3)


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("+actor_train.model_args.lora_dropout=0.1", "actor_train.model_args.lora_dropout"),
        ("+actor_train.model_args.lora_target=q_.*", "actor_train.model_args.lora_target"),
        ("+is_lora=true", "is_lora"),
        ("+reward_norm=true", "reward_norm"),
        ("+reward_scale=2", "reward_scale"),
        ("+error_max_len_clip=true", "error_max_len_clip"),
        ("+rewards.mine.worker_cls=my.reward.Worker", "rewards.mine.worker_cls"),
        ("+rewards.code.use_local=false", "rewards.code.use_local"),
        ("actor_train.data_args.template=longCOT_qwen2.5", "actor_train.data_args.template"),
        ("+global_template=base", "global_template"),
        ("+actor_train.model_args.dtype=int8", "actor_train.model_args.dtype"),
    ],
)
def test_settings_rl_has_not_are_refused_by_name(file, override, key):
    _, refused, _ = run(file, override)
    assert key in refused


def test_rolls_domains_masks_and_mix_map(file):
    math = "roll.pipeline.rlvr.rewards.math_rule_reward_worker.MathRuleRewardWorker"
    judge = (
        "roll.pipeline.rlvr.rewards.crossthinkqa_rule_reward_worker.CrossThinkQARuleRewardWorker"
    )
    config, refused, _ = run(
        file,
        f"+rewards.math_rule.worker_cls={math}",
        "+rewards.math_rule.tag_included=[aime]",
        "+rewards.math_rule.model_args.model_name_or_path=Qwen/Qwen3-8B",
        f"+rewards.qa.worker_cls={judge}",
        "+rewards.qa.tag_included=[crossthinkqa]",
        "+rewards.qa.reward_type=hard",
        "+actor_train.data_args.domain_interleave_probs={math_rule: 0.75, qa: 0.25}",
        "+max_len_mask=true",
        "+difficulty_mask=true",
        "+difficulty_low_threshold=0.1",
    )
    assert not refused
    domains = config.reward.domains
    assert (domains["math_rule"].scorer, domains["math_rule"].tag_included) == (
        "math_rule",
        ("aime",),
    )
    assert (domains["qa"].scorer, domains["qa"].options) == (
        "crossthinkqa",
        {"reward_type": "hard"},
    )
    assert config.data.domain_interleave_probs == {"math_rule": 0.75, "qa": 0.25}
    assert config.data.default_domain == "math_rule"  # ROLL's fallback for other tags
    algorithm = config.algorithm
    assert algorithm.max_len_mask and algorithm.difficulty_mask and algorithm.advantage_by_domain
    assert (algorithm.difficulty_low_threshold, algorithm.difficulty_high_threshold) == (0.1, 1.0)


@pytest.mark.parametrize(
    ("template", "mode", "kwargs", "custom"),
    [
        ("qwen2_5", "native", {}, None),
        ("native", "native", {}, None),
        ("qwen3", "native", {"enable_thinking": True}, None),
        ("chatml", "native", {}, "<|im_start|>"),
    ],
)
def test_named_templates_render_as_roll_renders_them(file, template, mode, kwargs, custom):
    config, refused, _ = run(file, f"actor_train.data_args.template={template}")
    assert not refused and config.data.chat_template == mode
    assert config.data.apply_chat_template_kwargs == kwargs
    assert (config.model.custom_chat_template or None) == custom or custom in (
        config.model.custom_chat_template or ""
    )
    # global_template wins over actor_train's (ROLL's pipeline)
    config, _, _ = run(file, "+global_template=qwen3")
    assert config.data.apply_chat_template_kwargs == {"enable_thinking": True}


def test_roll_lora_maps_when_lora_target_is_set_as_roll_reads_it(file):
    """ROLL trains LoRA when actor_train.model_args.lora_target is set; its lora_rank is 8
    and lora_alpha 2 × rank unless given; comma-separated targets are module names."""
    config, refused, _ = run(file, "+actor_train.model_args.lora_rank=32")
    assert not refused and config.model.lora_rank == 0  # no lora_target: ROLL trains it all
    config, refused, _ = run(file, "+actor_train.model_args.lora_target='q_proj,v_proj'")
    assert not refused
    model = config.model
    assert (model.lora_rank, model.lora_alpha, model.target_modules) == (
        8,
        16,
        ("q_proj", "v_proj"),
    )
    config, refused, _ = run(
        file,
        "+actor_train.model_args.lora_target=all-linear",
        "+actor_train.model_args.lora_rank=32",
        "+actor_train.model_args.lora_alpha=32",
        "+actor_train.model_args.adapter_name_or_path=/adapters/a",
    )
    model = config.model
    assert not refused
    assert (model.lora_rank, model.lora_alpha, model.target_modules) == (32, 32, "all-linear")
    assert model.lora_adapter_path == "/adapters/a"


def test_rolls_code_sandbox_worker_runs_its_local_tests_in_rls_sandbox(file):
    code = "roll.pipeline.rlvr.rewards.code_sandbox_reward_worker.CodeSandboxRewardWorker"
    config, refused, _ = run(
        file,
        f"+rewards.code_sandbox.worker_cls={code}",
        "+rewards.code_sandbox.tag_included=[KodCode]",
        "+rewards.code_sandbox.use_local=true",
        "+rewards.code_sandbox.world_size=8",
    )
    assert not refused
    assert config.reward.domains["code_sandbox"].scorer == "code_sandbox"
    assert config.reward.domains["code_sandbox"].tag_included == ("KodCode",)
    _, refused, _ = run(
        file, f"+rewards.code_sandbox.worker_cls={code}", "+rewards.code_sandbox.use_local=false"
    )
    assert "rewards.code_sandbox.use_local" in refused


JUDGE_WORKER = "roll.pipeline.rlvr.rewards.llm_judge_reward_worker.LLMJudgeRewardWorker"


@pytest.mark.parametrize(
    ("override", "check"),
    [
        ("+rewards.j.strategy_args.strategy_name=hf_infer", lambda j: j.engine == "hf"),
        ("+rewards.j.strategy_args.strategy_name=vllm", lambda j: j.engine == "vllm"),
        ("+rewards.j.generating_args.temperature=0.3", lambda j: j.temperature == 0.3),
        ("+rewards.j.infer_batch_size=16", lambda j: j.batch_size == 16),
        ("+rewards.j.device_mapping='[6, 7]'", lambda j: (j.placement, j.replicas) == ("ray", 2)),
        ("+rewards.j.model_args.dtype=fp32", lambda j: j.dtype == "float32"),
    ],
)
def test_each_judge_setting_flipped_changes_the_judge(file, override, check):
    judge = [f"+rewards.j.worker_cls={JUDGE_WORKER}", "+rewards.j.model_args.model_name_or_path=/m"]
    config, refused, _ = run(file, *judge, override)
    assert not refused and check(config.reward.domains["j"].judge)
    assert config.reward.domains["j"].scorer == "llm_judge"


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("+rewards.j.judge_model_type=api", "rewards.j.judge_model_type"),
        ("+rewards.j.judge_model_type=cluster", "rewards.j.judge_model_type"),
        ("+rewards.j.judge_prompt=my-prompt", "rewards.j.judge_prompt"),
        ("+rewards.j.generating_args.num_beams=4", "rewards.j.generating_args.num_beams"),
        (
            "+rewards.j.strategy_args.strategy_name=deepspeed_infer",
            "rewards.j.strategy_args.strategy_name",
        ),
    ],
)
def test_judge_settings_rl_has_not_are_refused_by_name(file, override, key):
    judge = [f"+rewards.j.worker_cls={JUDGE_WORKER}", "+rewards.j.model_args.model_name_or_path=/m"]
    _, refused, _ = run(file, *judge, override)
    assert key in refused


def test_a_reward_clip_that_cannot_bind_on_normalised_rewards_is_ignored(file):
    """ROLL clamps grpo's group-normalised rewards; with the unbiased std, a reward is at
    most (n - 1) / sqrt(n) from 0 (one sample apart from the others: checked here in
    float64), so a larger bound changes nothing and a smaller one is refused."""
    import torch

    for n in (2, 4, 8, 16):
        rewards = torch.zeros(n, dtype=torch.float64)
        rewards[0] = 1.0
        reach = float(((rewards - rewards.mean()) / rewards.std()).abs().max())
        assert reach == pytest.approx((n - 1) / n**0.5)
    grpo = [
        "adv_estimator=grpo",
        "num_return_sequences_in_group=8",
        "actor_train.training_args.per_device_train_batch_size=8",
    ]
    config, refused, _ = run(file, *grpo, "+reward_clip=10")
    assert not refused and config.algorithm.reward_clip is None
    _, refused, _ = run(file, *grpo, "+reward_clip=2")  # 2 < 7 / sqrt(8) = 2.47: binds
    assert "reward_clip" in refused
