"""verl's LoRA keys (actor_rollout_ref.model.lora_*, verl 0.9's model.lora. section, the SFT
trainer's model.lora_*) through the verl dialect: mapped where rl trains as verl would,
refused by name where it cannot."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl.cli.dialects import convert
from rl.core.config import config_from_mapping

RELEASES = ("0.6.1", "0.7.1", "0.9.1")
HERE = Path(__file__).parent / "verl"
LORA = [
    "actor_rollout_ref.model.lora_rank=8",
    "actor_rollout_ref.model.lora_alpha=16",
    "actor_rollout_ref.model.target_modules=all-linear",
]
GRPO = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.actor.use_kl_loss=true"]


@pytest.fixture(params=RELEASES)
def ppo_trainer(request, verl_release):
    return verl_release(request.param) / "verl" / "trainer" / "config" / "ppo_trainer.yaml"


@pytest.fixture
def converted(verl_quickstart):
    quickstart = verl_quickstart("/models/q", "/data/train.parquet", "/data/test.parquet")
    return lambda path, *overrides: convert("verl", path, [*quickstart, *GRPO, *overrides])


def statuses(conversion):
    return {e.source: e for e in conversion.report.entries}


def test_verls_lora_keys_map_with_nothing_unsupported(ppo_trainer, converted):
    conversion = converted(
        ppo_trainer,
        *LORA,
        "actor_rollout_ref.model.exclude_modules=[down_proj]",
        "actor_rollout_ref.model.lora_adapter_path=/adapters/a",
    )
    assert [e.source for e in conversion.report.entries if e.status == "unsupported"] == []
    model = config_from_mapping(conversion.config, "converted").model
    assert (model.lora_rank, model.lora_alpha, model.target_modules) == (8, 16, "all-linear")
    assert model.exclude_modules == ("down_proj",)
    assert model.lora_adapter_path == "/adapters/a"


def test_lora_keys_change_the_run_only_while_lora_rank_is_on(verl_release, converted):
    ppo_trainer = verl_release("0.9.1") / "verl" / "trainer" / "config" / "ppo_trainer.yaml"
    alpha = "actor_rollout_ref.model.lora_alpha=64"
    assert converted(ppo_trainer, alpha).config == converted(ppo_trainer).config
    on = converted(ppo_trainer, *LORA).config
    assert converted(ppo_trainer, *LORA, alpha).config != on
    assert config_from_mapping(converted(ppo_trainer).config, "off").model.lora_rank == 0


def test_verl_09s_lora_section_merge_is_handled_and_megatron_lora_and_dora_refused(
    verl_release, converted
):
    path = verl_release("0.9.1") / "verl" / "trainer" / "config" / "ppo_trainer.yaml"
    entries = statuses(converted(path, *LORA, "actor_rollout_ref.model.lora.merge=true"))
    assert entries["actor_rollout_ref.model.lora.merge"].status == "ignored"
    assert "merged" in entries["actor_rollout_ref.model.lora.merge"].reason
    for override, key, words in (
        ("actor_rollout_ref.model.lora.rank=8", "actor_rollout_ref.model.lora.rank", "megatron"),
        ("actor_rollout_ref.model.lora.type=dora", "actor_rollout_ref.model.lora.type", "DoRA"),
    ):
        entry = statuses(converted(path, *LORA, override))[key]
        assert entry.status == "unsupported" and words in entry.reason


def test_a_lora_critic_is_refused_by_name(ppo_trainer, converted):
    conversion = converted(ppo_trainer, "algorithm.adv_estimator=gae", "critic.model.lora_rank=8")
    entry = statuses(conversion)["critic.model.lora_rank"]
    assert entry.status == "unsupported" and "LoRA critic" in entry.reason


def test_verls_sft_lora_keys_map():
    overrides = ["model.lora_rank=16", "+model.lora_alpha=32", "+model.target_modules=[q_proj]"]
    conversion = convert("verl", HERE / "sft.yaml", ["trainer.total_training_steps=7", *overrides])
    refused = [e.source for e in conversion.report.entries if e.status == "unsupported"]
    assert not [key for key in refused if key.startswith("model.")]
    model = config_from_mapping(conversion.config, "sft").model
    assert (model.lora_rank, model.lora_alpha, model.target_modules) == (16, 32, ("q_proj",))
