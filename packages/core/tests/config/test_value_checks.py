"""Every value is refused up front, in one line naming the full key, the value and what is
allowed — also inside sections that appear at several places (`actor.optim`, `critic.optim`)."""

import math

import pytest

from rl.core.config import ConfigError, OptimConfig, load_config
from rl.core.config.errors import FieldError

BAD_VALUES = [
    # the same section at two places names the place
    ("actor.optim.grad_clip=-1", "actor.optim.grad_clip = -1.0 is not allowed: > 0"),
    ("critic.optim.grad_clip=-1", "critic.optim.grad_clip = -1.0 is not allowed: > 0"),
    ("critic.optim.lr=0", "critic.optim.lr = 0.0 is not allowed: > 0"),
    ("actor.optim.weight_decay=-0.1", "actor.optim.weight_decay = -0.1 is not allowed: >= 0"),
    ("actor.optim.betas=[0.9]", "actor.optim.betas = (0.9,) is not allowed: two numbers in [0, 1)"),
    ("critic.optim.betas=[0.9,1.0]", "critic.optim.betas = (0.9, 1.0) is not allowed"),
    ("actor.optim.lr_warmup_steps=-1", "actor.optim.lr_warmup_steps = -1 is not allowed: >= 0"),
    ("critic.optim.min_lr_ratio=2", "critic.optim.min_lr_ratio = 2.0 is not allowed: in [0, 1]"),
    ("actor.optim.wsd_decay_ratio=1.5", "actor.optim.wsd_decay_ratio = 1.5 is not allowed"),
    # model
    ("model.tiny.hidden_size=96", "model.tiny.hidden_size = 96 is not allowed: hidden_size /"),
    ("model.tiny.num_attention_heads=0", "model.tiny.num_attention_heads = 0 is not allowed"),
    ("model.tiny.num_hidden_layers=0", "model.tiny.num_hidden_layers = 0 is not allowed: >= 1"),
    ("model.tiny.num_key_value_heads=3", "model.tiny.num_key_value_heads = 3 is not allowed"),
    ("model.tiny.intermediate_size=0", "model.tiny.intermediate_size = 0 is not allowed: >= 1"),
    ("model.path=''", "model.path = '' is not allowed"),
    # data
    ("data.train_batch_size=0", "data.train_batch_size = 0 is not allowed: >= 1"),
    ("data.val_batch_size=0", "data.val_batch_size = 0 is not allowed: >= 1"),
    ("data.builtin_train_size=0", "data.builtin_train_size = 0 is not allowed: >= 1"),
    ("data.builtin_val_size=-3", "data.builtin_val_size = -3 is not allowed: >= 1"),
    ("data.builtin_max_operand=-1", "data.builtin_max_operand = -1 is not allowed: >= 0"),
    ("data.filter_num_workers=0", "data.filter_num_workers = 0 is not allowed: >= 1"),
    ("data.train_files=[]", "data.train_files = () is not allowed: at least one file"),
    ("data.val_files=[]", "data.val_files = () is not allowed: at least one file"),
    ("data.seed=-1", "data.seed = -1 is not allowed: in [0, 2**32)"),
    ("data.prompt_key=''", "data.prompt_key = '' is not allowed"),
    # actor
    ("actor.ppo_mini_batch_size=0", "actor.ppo_mini_batch_size = 0 is not allowed: >= 1"),
    ("actor.ppo_micro_batch_size_per_gpu=0", "actor.ppo_micro_batch_size_per_gpu = 0 is not"),
    ("actor.ppo_epochs=0", "actor.ppo_epochs = 0 is not allowed: >= 1"),
    ("actor.clip_ratio=0", "actor.clip_ratio = 0.0 is not allowed: in (0, 1)"),
    ("actor.clip_ratio=1.5", "actor.clip_ratio = 1.5 is not allowed: in (0, 1)"),
    ("actor.clip_ratio_low=1", "actor.clip_ratio_low = 1.0 is not allowed: in [0, 1) or null"),
    ("actor.clip_ratio_high=0", "actor.clip_ratio_high = 0.0 is not allowed: > 0 or null"),
    ("actor.clip_ratio_c=1", "actor.clip_ratio_c = 1.0 is not allowed: > 1"),
    ("actor.kl_loss_coef=-1", "actor.kl_loss_coef = -1.0 is not allowed: >= 0"),
    ("actor.loss_scale_factor=0", "actor.loss_scale_factor = 0.0 is not allowed: > 0 or null"),
    ("actor.tis_cap=0", "actor.tis_cap = 0.0 is not allowed: > 0 or null"),
    ("actor.early_stop_imp_ratio=-2", "actor.early_stop_imp_ratio = -2.0 is not allowed"),
    ("actor.strategy=''", "actor.strategy = '' is not allowed"),
    # critic: the actor's checks
    ("critic.ppo_mini_batch_size=0", "critic.ppo_mini_batch_size = 0 is not allowed: >= 1"),
    ("critic.ppo_micro_batch_size_per_gpu=0", "critic.ppo_micro_batch_size_per_gpu = 0 is not"),
    ("critic.ppo_epochs=0", "critic.ppo_epochs = 0 is not allowed: >= 1"),
    ("critic.cliprange_value=0", "critic.cliprange_value = 0.0 is not allowed: > 0"),
    ("critic.loss_scale_factor=-1", "critic.loss_scale_factor = -1.0 is not allowed: > 0 or null"),
    # rollout
    ("rollout.top_k=-2", "rollout.top_k = -2 is not allowed: -1 or 0 (off) or >= 1"),
    ("rollout.min_new_tokens=-1", "rollout.min_new_tokens = -1 is not allowed: >= 0"),
    ("rollout.val_kwargs.n=0", "rollout.val_kwargs.n = 0 is not allowed: >= 1"),
    ("rollout.val_kwargs.temperature=-1", "rollout.val_kwargs.temperature = -1.0 is not"),
    ("rollout.val_kwargs.top_p=0", "rollout.val_kwargs.top_p = 0.0 is not allowed: in (0, 1]"),
    ("rollout.val_kwargs.top_k=-5", "rollout.val_kwargs.top_k = -5 is not allowed"),
    ("rollout.name=''", "rollout.name = '' is not allowed"),
    # reward
    ("reward.timeout_s=0", "reward.timeout_s = 0.0 is not allowed: > 0"),
    ("reward.max_error_rate=0", "reward.max_error_rate = 0.0 is not allowed: in (0, 1]"),
    ("reward.max_error_rate=1.5", "reward.max_error_rate = 1.5 is not allowed: in (0, 1]"),
    ("reward.error_rate_window=0", "reward.error_rate_window = 0 is not allowed: >= 1"),
    ("reward.num_workers=-1", "reward.num_workers = -1 is not allowed: >= 0"),
    ("reward.reward_scale=-1", "reward.reward_scale = -1.0 is not allowed: > 0 or null"),
    ("reward.reward_model.batch_size=0", "reward.reward_model.batch_size = 0 is not allowed"),
    ("reward.reward_model.max_length=0", "reward.reward_model.max_length = 0 is not allowed"),
    ("reward.custom_reward_function.name=''", "reward.custom_reward_function.name = '' is not"),
    # algorithm
    ("algorithm.gamma=1.5", "algorithm.gamma = 1.5 is not allowed: in [0, 1]"),
    ("algorithm.lam=-0.1", "algorithm.lam = -0.1 is not allowed: in [0, 1]"),
    ("algorithm.kl_ctrl.kl_coef=-1", "algorithm.kl_ctrl.kl_coef = -1.0 is not allowed: >= 0"),
    ("algorithm.kl_ctrl.target_kl=0", "algorithm.kl_ctrl.target_kl = 0.0 is not allowed: > 0"),
    ("algorithm.kl_ctrl.horizon=0", "algorithm.kl_ctrl.horizon = 0 is not allowed: >= 1"),
    # sft
    ("sft.steps=-1", "sft.steps = -1 is not allowed: >= 0"),
    ("sft.batch_size=0", "sft.batch_size = 0 is not allowed: >= 1"),
    ("sft.lr=0", "sft.lr = 0.0 is not allowed: > 0"),
    # trainer
    ("trainer.total_training_steps=0", "trainer.total_training_steps = 0 is not allowed"),
    ("trainer.max_skipped_steps=0", "trainer.max_skipped_steps = 0 is not allowed: >= 1"),
    ("trainer.max_ckpt_to_keep=0", "trainer.max_ckpt_to_keep = 0 is not allowed: >= 1 or null"),
    ("trainer.save_freq=-2", "trainer.save_freq = -2 is not allowed: -1 or 0 (off) or >= 1"),
    ("trainer.test_freq=-7", "trainer.test_freq = -7 is not allowed: -1 or 0 (off) or >= 1"),
    ("trainer.seed=-1", "trainer.seed = -1 is not allowed: in [0, 2**32)"),
    ("trainer.log_val_generations=-1", "trainer.log_val_generations = -1 is not allowed"),
    ("trainer.output_dir=''", "trainer.output_dir = '' is not allowed"),
    (
        "trainer.resume_mode=path",
        "trainer.resume_from_path = None is not allowed: a checkpoint folder when resume_mode",
    ),
]


@pytest.mark.parametrize(("override", "message"), BAD_VALUES)
def test_a_bad_value_names_the_full_key(override, message):
    with pytest.raises(ConfigError) as error:
        load_config(overrides=[override])
    assert message in str(error.value)
    assert "\n" not in str(error.value)


CROSS_SECTION = [
    (
        ["data.train_batch_size=10"],
        "data.train_batch_size = 10 is not allowed: a multiple of actor.ppo_mini_batch_size (8)",
    ),
    (
        ["algorithm.adv_estimator=gae", "critic.ppo_mini_batch_size=3"],
        "data.train_batch_size = 16 is not allowed: a multiple of critic.ppo_mini_batch_size (3)",
    ),
    (
        ["rollout.min_new_tokens=9"],
        "rollout.min_new_tokens = 9 is not allowed: <= data.max_response_length (8)",
    ),
    (
        ["data.builtin_train_size=8"],
        "data.builtin_train_size = 8 is not allowed: >= data.train_batch_size (16)",
    ),
]


@pytest.mark.parametrize(("overrides", "message"), CROSS_SECTION)
def test_checks_across_sections_name_both_keys(overrides, message):
    with pytest.raises(ConfigError) as error:
        load_config(overrides=overrides)
    assert message in str(error.value)


def test_a_critic_mini_batch_is_free_without_a_critic():
    config = load_config(overrides=["critic.ppo_mini_batch_size=3"])
    assert not config.uses_critic


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", ".inf", ".nan"])
@pytest.mark.parametrize("key", ["actor.optim.lr", "actor.optim.grad_clip", "actor.clip_ratio_c"])
def test_non_finite_numbers_are_refused(key, value):
    with pytest.raises(ConfigError, match=rf"{key} = .*: expected a finite number"):
        load_config(overrides=[f"{key}={value}"])


@pytest.mark.parametrize(
    "override",
    [
        "actor.clip_ratio_high=0.28",  # DAPO clip-higher
        "actor.clip_ratio_low=0.0",
        "actor.clip_ratio_high=5",  # CISPO-style wide upper bound
        "rollout.top_k=0",  # off, as Hugging Face generate() reads it
        "rollout.top_k=-1",  # off, as vLLM reads it
        "rollout.top_k=50",
        "trainer.save_freq=0",
        "trainer.test_freq=-1",
        "trainer.max_ckpt_to_keep=null",
        "reward.max_error_rate=1",
        "sft.steps=0",
        "data.builtin_max_operand=0",
        "algorithm.kl_ctrl.horizon=1",
        "actor.clip_ratio_c=null",  # no dual clip (ROLL's dual_clip_loss: false, RLinf's null)
    ],
)
def test_edge_values_that_are_allowed(override):
    load_config(overrides=[override])


def test_a_section_built_alone_names_the_key_relative_to_itself():
    with pytest.raises(FieldError) as error:
        OptimConfig(grad_clip=-1.0)
    assert (error.value.key, error.value.value) == ("grad_clip", -1.0)
    assert str(error.value) == "grad_clip = -1.0 is not allowed: > 0"
    assert str(error.value.within("critic.optim")) == (
        "critic.optim.grad_clip = -1.0 is not allowed: > 0"
    )
    assert math.isclose(OptimConfig(grad_clip=0.5).grad_clip, 0.5)
