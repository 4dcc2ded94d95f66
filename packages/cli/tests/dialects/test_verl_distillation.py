"""verl 0.9.1's `distillation` section (its released ppo_trainer.yaml): read only while
`distillation.enabled`, mapped onto ours with verl's names; what rl cannot run (top-k
losses, several teachers, a teacher at another temperature) is refused by name."""

from __future__ import annotations

import pytest

from rl.cli.dialects import convert
from rl.core.config import ConfigError, config_from_mapping

ON = ["distillation.enabled=true", "distillation.teacher_models.teacher_model.model_path=/m/t"]


@pytest.fixture(scope="module")
def converted(verl_release, verl_quickstart):
    path = verl_release("0.9.1") / "verl" / "trainer" / "config" / "ppo_trainer.yaml"
    quickstart = verl_quickstart("/models/qwen", "/data/train.parquet", "/data/test.parquet")
    return lambda *overrides: convert("verl", path, [*quickstart, *overrides])


def unsupported(conversion):
    return {e.source: e.reason for e in conversion.report.entries if e.status == "unsupported"}


def test_the_section_maps_with_verl_s_names(converted):
    conversion = converted(
        *ON,
        "distillation.distillation_loss.loss_mode=k1",
        "distillation.distillation_loss.use_policy_gradient=true",
        "distillation.distillation_loss.use_task_rewards=false",
        "distillation.distillation_loss.loss_max_clamp=5.0",
    )
    assert unsupported(conversion) == {}
    config = config_from_mapping(conversion.config, "converted")
    distillation = config.distillation
    assert distillation.enabled and distillation.teacher_model.model_path == "/m/t"
    loss = distillation.distillation_loss
    assert (loss.loss_mode, loss.use_policy_gradient, loss.use_task_rewards) == ("k1", True, False)
    assert loss.loss_max_clamp == 5.0 and loss.distillation_loss_coef == 1.0
    assert distillation.teacher_model.dtype == "bfloat16"  # verl's rollout dtype, by default
    assert not distillation.as_advantage  # verl: the loss, not the advantages


def test_the_section_changes_the_run_only_while_enabled(converted):
    inside = "distillation.distillation_loss.distillation_loss_coef=0.5"
    off = ["distillation.enabled=false"]
    assert converted(*off, inside).config == converted(*off).config
    assert "distillation" not in converted(*off).config
    assert converted(*ON, inside).config != converted(*ON).config


def test_what_rl_cannot_run_is_refused_by_name(converted):
    refused = unsupported(
        converted(
            *ON,
            "distillation.distillation_loss.loss_mode=forward_kl_topk",
            "+distillation.teacher_models.teacher_model2.model_path=/m/u",
        )
    )
    assert "top-k" in refused["distillation.distillation_loss.loss_mode"]
    assert "several teachers" in refused["distillation.teacher_models.teacher_model2.model_path"]


def test_a_teacher_at_another_temperature_is_refused(converted):
    with pytest.raises(ConfigError, match="teacher_model.inference.temperature"):
        converted(*ON, "distillation.teacher_models.teacher_model.inference.temperature=0.5")


def test_k1_as_a_supervised_loss_is_refused_as_verl_does(converted):
    conversion = converted(*ON, "distillation.distillation_loss.loss_mode=k1")
    with pytest.raises(ConfigError, match="distillation.distillation_loss.loss_mode"):
        config_from_mapping(conversion.config, "converted")
