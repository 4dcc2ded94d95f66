"""ROLL's on-policy distillation keys: pure OPD (`is_pure_opd`, the student's roles under
student_*) and mixed OPD (`use_opd`) map onto rl's `distillation.as_advantage` with the
teacher's coefficient and ROLL's `kl_penalty` as the estimator; what ROLL's OPD changes
silently or rl cannot run is refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl.cli.dialects import convert
from rl.core.config import ConfigError, config_from_mapping

OPD = Path(__file__).parent / "roll" / "opd" / "pure_opd.yaml"
RLVR = Path(__file__).parent / "roll" / "rlvr" / "rlvr_fsdp2_gae.yaml"


def unsupported(conversion):
    return {e.source: e.reason for e in conversion.report.entries if e.status == "unsupported"}


def test_pure_opd_maps_students_teacher_and_coefficient():
    conversion = convert("roll", OPD, ["+is_pure_opd=true"])
    assert not any(key.startswith(("student_", "teacher.")) for key in unsupported(conversion))
    config = config_from_mapping(conversion.config, "converted")
    distillation = config.distillation
    assert distillation.enabled and distillation.as_advantage
    assert distillation.teacher_model.model_path == "/models/teacher"
    assert distillation.teacher_model.dtype == "bfloat16"
    assert distillation.teacher_model.log_prob_micro_batch_size_per_gpu == 2
    loss = distillation.distillation_loss
    assert (loss.loss_mode, loss.use_task_rewards, loss.distillation_loss_coef) == (
        "kl",
        False,
        0.5,
    )
    assert config.actor.optim.lr == 1e-6  # student_train is the actor
    assert config.rollout.temperature == 0.99  # student_infer samples


def test_student_roles_without_pure_opd_are_refused():
    with pytest.raises(ConfigError, match=r"student_infer, student_train: .*\+is_pure_opd=true"):
        convert("roll", OPD)


def test_mixed_opd_keeps_the_task_advantage_and_reads_kl_penalty():
    conversion = convert(
        "roll",
        RLVR,
        [
            "+use_opd=true",
            "+teacher.model_args.model_name_or_path=/models/teacher",
            "+kl_penalty=mse",
            "adv_estimator=grpo",
        ],
    )
    config = config_from_mapping(conversion.config, "converted")
    distillation = config.distillation
    assert distillation.enabled and distillation.as_advantage
    loss = distillation.distillation_loss
    assert (loss.loss_mode, loss.use_task_rewards, loss.distillation_loss_coef) == (
        "mse",
        True,
        1.0,
    )


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        (["+is_pure_opd=true", "+use_opd=true"], "both true"),
        (["+is_pure_opd=true", "+use_kl_loss=true"], "use_kl_loss"),
        (["+is_pure_opd=true", "adv_estimator=gae"], "reinforce"),
    ],
)
def test_what_roll_s_opd_changes_silently_is_refused(overrides, words):
    with pytest.raises(ConfigError, match=words):
        convert("roll", OPD, overrides)


def test_full_kl_several_teachers_and_tag_routing_are_refused_by_name():
    refused = unsupported(convert("roll", OPD, ["+is_pure_opd=true", "+kl_penalty=full"]))
    assert "is_pure_opd" in refused and "full" in refused["is_pure_opd"]
    refused = unsupported(
        convert("roll", OPD, ["+is_pure_opd=true", "+teacher.tag_included=[math]"])
    )
    assert "teacher.tag_included" in refused
