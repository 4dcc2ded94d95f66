"""ROLL's on-policy distillation (OPD) keys: `use_opd` (mixed: advantage = task advantage
- opd_kl_coef x KL estimate) and `is_pure_opd` (advantage = -opd_kl_coef x estimate) are
rl's `distillation.as_advantage` (roll/utils/functionals.py compute_advantage: the estimate
is ROLL's `kl_penalty` of the student's log-probs against the teacher's, subtracted after
the estimator and before whitening and clipping, as rl does). One teacher, on the actor's
devices; several teachers (a dict under `teacher`) are refused by name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rl.cli.dialects.mapping import Rule, Unsupported, ignore
from rl.cli.dialects.roll import values
from rl.cli.dialects.switches import truthy
from rl.core.algorithms.distillation import ESTIMATOR_LOSS_MODES
from rl.core.config.errors import ConfigError

_ON_ACTOR = (
    "a setting of ROLL's teacher worker: rl's teacher runs its log-prob pass on the "
    "actor's devices and train backend, taking turns with it, as the reference does"
)
_TEACHER = "distillation.teacher_model."


def _on(flat: Mapping[str, Any]) -> Any:
    return True if truthy(flat.get("use_opd")) or truthy(flat.get("is_pure_opd")) else None


def _pure(flat: Mapping[str, Any]) -> Any:
    """Pure OPD: no task reward in the advantage."""
    return False if truthy(flat.get("is_pure_opd")) else None


def _loss_mode(flat: Mapping[str, Any]) -> Any:
    """ROLL's `kl_penalty` is the OPD estimator too (kl, abs, mse, k3; `full` refused)."""
    if not _on(flat):
        return None
    mode = flat.get("kl_penalty", "kl")
    if mode not in ESTIMATOR_LOSS_MODES:
        return Unsupported(
            f"kl_penalty {mode!r} as the OPD estimator: rl's teacher returns "
            "the sampled token's log-prob only"
        )
    return mode


def _enabled(flat: Mapping[str, Any]) -> Any:
    """On with either switch; refused when ROLL's estimator is one rl cannot run (the
    `also` values of a rule are not checked for it)."""
    mode = _loss_mode(flat)
    return mode if isinstance(mode, Unsupported) else _on(flat)


_SWITCH = (
    ("distillation.as_advantage", _on),
    ("distillation.distillation_loss.loss_mode", _loss_mode),
    ("distillation.distillation_loss.use_task_rewards", _pure),
)

RULES: list[Rule] = [
    Rule("use_opd", "distillation.enabled", derive=_enabled, also=_SWITCH),
    Rule("is_pure_opd", "distillation.enabled", derive=_enabled, also=_SWITCH),
    Rule(
        "pure_opd_pipeline_type",
        reason="ROLL's agentic OPD pipeline is not in rl (its rlvr one is)",
        convert=lambda v: None if v in (None, "rlvr") else v,
    ),
    Rule("teacher.model_args.model_name_or_path", _TEACHER + "model_path"),
    Rule("teacher.model_args.dtype", _TEACHER + "dtype", convert=values.dtype),
    Rule("teacher.infer_batch_size", _TEACHER + "log_prob_micro_batch_size_per_gpu"),
    Rule("teacher.use_dynamic_batching_in_infer", _TEACHER + "log_prob_use_dynamic_bsz"),
    Rule("teacher.max_tokens_per_microbatch_in_infer", _TEACHER + "log_prob_max_token_len_per_gpu"),
    Rule("teacher.opd_kl_coef", "distillation.distillation_loss.distillation_loss_coef"),
    Rule(
        "teacher.*.model_args.model_name_or_path",
        reason="several teachers (routed by tag) are not in rl: give one teacher's "
        "model_args directly under teacher",
    ),
    Rule(
        "teacher.tag_included",
        reason="ROLL's teacher then scores only rows of these tags; rl's scores every row",
        convert=lambda v: v or None,
    ),
    ignore("teacher.", _ON_ACTOR),
    Rule(
        "student_*",
        reason="ROLL's pure-OPD names of actor_train / actor_infer, read only with "
        "is_pure_opd=true (start_onpolicy_distill_pipeline.py sets it: pass +is_pure_opd=true)",
    ),
]


def rename_students(values: dict[str, Any]) -> None:
    """ROLL's pure OPD (`is_pure_opd`) trains `student_train` and samples from
    `student_infer` as its actor_train / actor_infer (base_config._handle_opd_mapping)."""
    if not truthy(values.get("is_pure_opd")):
        return
    for student, actor in (("student_train", "actor_train"), ("student_infer", "actor_infer")):
        if isinstance(values.get(student), dict):
            values[actor] = values.pop(student)


def check(flat: Mapping[str, Any]) -> None:
    """What ROLL's OPD set-up changes silently, refused unless already so: pure OPD
    turns off the KL loss and the token-level KL and trains without a critic (reinforce,
    gamma 0); mixed OPD runs the teacher as the reference, so a KL to the reference
    would be a KL to the teacher. The student's roles outside pure OPD are refused."""
    students = sorted({key.split(".")[0] for key in flat if key.startswith("student_")})
    if students and not truthy(flat.get("is_pure_opd")):
        raise ConfigError(
            f"{', '.join(students)}: ROLL reads the student's roles only in pure OPD "
            "(is_pure_opd, which start_onpolicy_distill_pipeline.py sets): pass "
            "+is_pure_opd=true, or name them actor_train / actor_infer"
        )
    if not _on(flat):
        return
    pure = truthy(flat.get("is_pure_opd"))
    if pure and truthy(flat.get("use_opd")):
        raise ConfigError("is_pure_opd and use_opd are both true: ROLL refuses that; keep one")
    for key in ("use_kl_loss", "add_token_level_kl"):
        if truthy(flat.get(key)):
            raise ConfigError(
                f"{key} = true with {'is_pure_opd' if pure else 'use_opd'}: ROLL "
                + ("turns it off in pure OPD" if pure else "runs the teacher as the reference")
                + f"; set {key}=false"
            )
    if pure and flat.get("adv_estimator") == "gae":
        raise ConfigError(
            "adv_estimator = 'gae' with is_pure_opd: ROLL trains pure OPD with reinforce and "
            "no critic; set adv_estimator=reinforce"
        )
