"""ChatLearn's own files (`chatlearn/upstream/`, verbatim from ChatLearn b7af31a9): each
template and launch script converts, or is refused in one line naming the keys and why; the
meaning-changing keys follow ChatLearn's code (loss_gallery, policy_trainer, train_helper,
prompt_dataset, rule_reward)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl.cli.dialects import convert, detect, refusal
from rl.cli.dialects.chatlearn.launch import LAUNCH
from rl.core.config import ConfigError, config_from_mapping

UPSTREAM = Path(__file__).parent / "chatlearn" / "upstream"
FSDP = UPSTREAM / "template" / "grpo_fsdp.yaml"
MEGATRON = UPSTREAM / "template" / "grpo_megatron.yaml"
SCRIPTS = sorted(UPSTREAM.glob("scripts/*/*.sh"))
# the scripts rl refuses, and the keys the one-line refusal names
REFUSED = {
    "train_fsdp_vllm_qwen2_5_vl_7b_grpo.sh": ["runtime_args.model_type"],
    "train_fsdp_vllm_qwen3_8b_grpo_partial_rollout.sh": ["runtime_args.use_partial_rollout"],
    "train_mcore_sglang_qwen2_5_vl_7b_grpo.sh": ["runtime_args.model_type"],
    "train_mcore_sglang_qwen2_5_vl_7b_grpo_rollout_manager.sh": [
        "runtime_args.use_rollout_manager",
        "runtime_args.model_type",
    ],
    "train_mcore_sglang_qwen3_8b_grpo_agentic_math_task.sh": [
        "runtime_args.task_type",
        "runtime_args.raw_chat",
        "runtime_args.use_rollout_manager",
    ],
    "train_mcore_sglang_qwen3_8b_grpo_rollout_manager.sh": ["runtime_args.use_rollout_manager"],
}


def config_of(conversion):
    return config_from_mapping(conversion.config, "converted")


def unsupported(conversion):
    return [e.source for e in conversion.report.entries if e.status == "unsupported"]


@pytest.mark.parametrize("template", [FSDP, MEGATRON], ids=lambda p: p.name)
def test_each_template_converts_with_nothing_refused(template):
    conversion = convert("chatlearn", template)
    assert unsupported(conversion) == []
    config = config_of(conversion)
    assert config.rollout.n == 32 and config.data.train_batch_size == 512 // 32
    assert config.actor.loss_agg_mode == "token-mean" and config.algorithm.adv_estimator == "grpo"
    # the rollout managers' sections are not read while runtime_args leaves them off
    assert any("use_rollout_manager is off" in note for note in conversion.report.notes)


def test_the_agent_templates_bring_their_turn_budgets():
    config = config_of(convert("chatlearn", UPSTREAM / "template" / "agent" / "math_eval.yaml"))
    assert config.rollout.multi_turn.max_assistant_turns == 3
    assert config.rollout.multi_turn.max_total_tokens == 32768
    # the geo3k agent's own chat template (Qwen2.5-VL's) renders its messages
    geo3k = config_of(convert("chatlearn", UPSTREAM / "template" / "agent" / "geo3k_eval.yaml"))
    assert geo3k.model.custom_chat_template.startswith("{% set image_count")


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_each_script_needs_num_device_from_base_env(script, monkeypatch):
    """base_env.sh (sourced, not read) sets num_device from the GPUs python counts."""
    monkeypatch.chdir(UPSTREAM)
    monkeypatch.delenv("num_device", raising=False)
    with pytest.raises(ConfigError) as refused:
        convert("chatlearn", script.relative_to(UPSTREAM))
    message = str(refused.value)
    assert "\n" not in message
    assert "models.policy_trainer.num_gpu uses $num_device" in message
    assert "export num_device" in message and "scripts/base_env.sh" in message


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_each_script_converts_or_is_refused_by_name(script, monkeypatch):
    monkeypatch.chdir(UPSTREAM)
    monkeypatch.setenv("num_device", "1")
    conversion = convert("chatlearn", script.relative_to(UPSTREAM))
    refused = REFUSED.get(script.name, [])
    assert [key for key in unsupported(conversion) if key in refused] == refused
    assert set(unsupported(conversion)) == set(refused)
    if refused:
        with pytest.raises(ConfigError) as error:
            refusal.settle(conversion.report, ())
        assert "\n" not in str(error.value)
        assert all(key in str(error.value) for key in refused)
        return
    config = config_of(conversion)
    assert config.cluster.n_gpus_per_node == 1
    assert config.rollout.name == ("sglang" if "sglang" in script.name else "vllm")
    # ${CHATLEARN}/pretrained_models/...: CHATLEARN=$(pwd), the checkout
    assert config.model.path.startswith(str(UPSTREAM / "pretrained_models"))


def test_passing_num_gpu_after_the_script_replaces_num_device(monkeypatch):
    monkeypatch.chdir(UPSTREAM)
    monkeypatch.delenv("num_device", raising=False)
    script = Path("scripts/fsdp_vllm/train_fsdp_vllm_qwen3_8b_grpo.sh")
    launch = LAUNCH.read(script, ["models.policy_trainer.num_gpu=1"])
    assert launch.config_file == UPSTREAM / "template" / "grpo_fsdp.yaml"
    assert "models.policy_trainer.num_gpu=1" in launch.overrides
    # `2>&1 | tee log ; exit ${PIPESTATUS[0]}` is no part of the command
    assert not any("tee" in o or "PIPESTATUS" in o or o.startswith("2>") for o in launch.overrides)
    config = config_of(convert("chatlearn", script, ["models.policy_trainer.num_gpu=1"]))
    assert config.cluster.n_gpus_per_node == 1
    assert config.data.train_files == (str(UPSTREAM / "dataset/MATH-lighteval/train.json"),)
    assert (config.data.train_batch_size, config.actor.ppo_mini_batch_size) == (64, 64)
    assert config.actor.use_dynamic_bsz  # packing=True
    assert config.rollout.gpu_memory_utilization == 0.85


def test_the_config_file_is_opened_from_where_the_script_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("num_device", "1")
    script = UPSTREAM / "scripts/fsdp_vllm/train_fsdp_vllm_qwen3_8b_grpo.sh"
    with pytest.raises(ConfigError, match=r"--config-file template/grpo_fsdp.yaml is not a file"):
        LAUNCH.read(script)


def test_scripts_are_detected_as_chatlearn():
    assert {detect(script) for script in SCRIPTS} == {"chatlearn"}


# --- the meaning-changing keys, flipped ------------------------------------------------


def flipped(*overrides, template=FSDP):
    return convert("chatlearn", template, list(overrides))


def test_clip_ratios_are_the_asymmetric_clip():
    """loss_gallery: clamp(ratio, 1 - neg_clip_ratio, 1 + pos_clip_ratio)."""
    config = config_of(
        flipped(
            "models.policy_trainer.pos_clip_ratio=0.28", "models.policy_trainer.neg_clip_ratio=0.1"
        )
    )
    assert (config.actor.clip_ratio_high, config.actor.clip_ratio_low) == (0.28, 0.1)


def test_chatlearns_log_ratio_clip_is_refused_when_set():
    conversion = flipped("models.policy_trainer.diff_clip_ratio=5")
    assert unsupported(conversion) == ["models.policy_trainer.diff_clip_ratio"]


@pytest.mark.parametrize("template", [FSDP, MEGATRON])
def test_chatlearns_fixed_loss_details_are_reproduced(template):
    """loss_gallery: min(clipped loss, final_clip_ratio = 3), no dual clip; advantage_compute:
    (r - mean) / (np.std + 1e-5), the population std."""
    conversion = flipped(template=template)
    config = config_of(conversion)
    assert (config.actor.policy_loss_cap, config.actor.clip_ratio_c) == (3.0, None)
    assert (config.algorithm.grpo_std, config.algorithm.grpo_std_eps) == ("population", 1e-5)
    assert not any("loss details" in note for note in conversion.report.notes)
    assert not unsupported(conversion)


def test_final_clip_ratio_is_the_policy_loss_cap():
    config = config_of(flipped("models.policy_trainer.final_clip_ratio=5"))
    assert (config.actor.policy_loss_cap, config.actor.clip_ratio_c) == (5.0, None)


def test_kl_and_entropy_coefficients_train_on_fsdp_only():
    """policy_trainer.py adds them when > 0; megatron's loss_func back-propagates pg_loss."""
    config = config_of(
        flipped("models.policy_trainer.kl_coef=0.01", "models.policy_trainer.entropy_coef=0.001")
    )
    assert config.actor.use_kl_loss and config.actor.kl_loss_coef == 0.01
    assert config.actor.kl_loss_type == "low_var_kl" and config.actor.entropy_coeff == 0.001
    assert not config_of(flipped()).actor.use_kl_loss
    conversion = flipped(
        "models.policy_trainer.kl_coef=0.01",
        "models.policy_trainer.entropy_coef=0.001",
        template=MEGATRON,
    )
    config = config_of(conversion)
    assert not config.actor.use_kl_loss and config.actor.entropy_coeff == 0.0
    assert any("kl_coef = 0.01: ChatLearn's megatron" in n for n in conversion.report.notes)


@pytest.mark.parametrize("value", [True, False])
def test_enable_thinking_reaches_the_chat_template(value):
    config = config_of(flipped(f"models.policy.enable_thinking={value}"))
    assert config.data.apply_chat_template_kwargs == {"enable_thinking": value}


def test_num_inference_per_prompt_is_the_group_size():
    config = config_of(flipped("runtime_args.num_inference_per_prompt=8"))
    assert (config.rollout.n, config.data.train_batch_size) == (8, 512 // 8)


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("runtime_args.use_partial_rollout=True", "runtime_args.use_partial_rollout"),
        ("runtime_args.use_rollout_manager=True", "runtime_args.use_rollout_manager"),
        ("runtime_args.task_type=agent", "runtime_args.task_type"),
        ("runtime_args.model_type=vlm", "runtime_args.model_type"),
        ("models.policy.vllm_prompt_key=text", "models.policy.vllm_prompt_key"),
    ],
)
def test_what_rl_does_not_run_is_refused_by_name(override, key):
    assert unsupported(flipped(override)) == [key]


def test_precision_and_loss_aggregation_are_chatlearns():
    fsdp = config_of(flipped())
    assert fsdp.model.dtype == "bfloat16" and fsdp.actor.loss_agg_mode == "token-mean"
    megatron = config_of(flipped("models.policy_trainer.bf16=False", template=MEGATRON))
    assert megatron.model.dtype == "float32"


def test_the_reward_is_chatlearns_scorer():
    config = config_of(flipped())
    assert config.reward.custom_reward_function.path == "pkg://rl.core.rewards.chatlearn_rule"
    assert config.data.filter_overlong_prompts


def test_infrastructure_keys_are_ignored_with_reasons():
    report = flipped().report
    status = {e.source: e.status for e in report.entries}
    for key in (
        "models.policy.gpu_per_process",
        "models.reward.cpu_per_process",
        "runtime_args.data_checkpoint_path",
        "runtime_args.log_args_dict.wandb_name",
        "models.policy.generation_batch_size",
        "runtime_args.max_replay_episode",
    ):
        assert status[key] == "ignored", key
    assert all(e.reason for e in report.entries if e.status == "ignored")
