"""The `distillation` section: on-policy distillation from a teacher model (verl 0.9.1's
section and key names; ROLL's `use_opd` / `is_pure_opd` / `opd_kl_coef` map onto it).

The teacher is a frozen model folder with the student's tokenizer; it scores the
student's sampled responses token by token (`teacher_logprobs`), and the reverse KL of
the student from it enters the actor's loss (verl) or its advantages (`as_advantage`:
ROLL). See docs/distillation.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from rl.core.algorithms.distillation import DistillationLossConfig, check_loss_mode
from rl.core.config.errors import FieldError
from rl.core.config.resume_rules import free
from rl.core.config.rules import NOT_EMPTY, POSITIVE_INT, Checked, optional, setting


@dataclass(frozen=True)
class TeacherModelConfig(Checked):
    """The teacher (verl: `distillation.teacher_models.teacher_model`): any model folder
    whose tokenizer is the student's; its log-prob pass runs on the train backend
    (`actor.strategy`), placed with the reference (on the actor's devices)."""

    model_path: str | None = setting(None, optional(NOT_EMPTY))
    # None: model.dtype
    dtype: Literal["float32", "bfloat16", "float16"] | None = None
    log_prob_micro_batch_size_per_gpu: int = free(16, POSITIVE_INT)
    log_prob_use_dynamic_bsz: bool = free(False)
    log_prob_max_token_len_per_gpu: int = free(16384, POSITIVE_INT)


@dataclass(frozen=True)
class DistillationConfig:
    enabled: bool = False
    teacher_model: TeacherModelConfig = field(default_factory=TeacherModelConfig)
    distillation_loss: DistillationLossConfig = field(default_factory=DistillationLossConfig)
    # the per-token estimate into the advantages (ROLL's OPD: advantage = task advantage
    # - distillation_loss_coef * estimate; without use_task_rewards, -coef * estimate)
    # instead of a term of the actor's loss (verl)
    as_advantage: bool = False

    def __post_init__(self) -> None:
        if not self.enabled:
            return
        if self.teacher_model.model_path is None:
            raise FieldError(
                "teacher_model.model_path", None, "a model folder (the teacher) when enabled"
            )
        loss = self.distillation_loss
        if not self.as_advantage:
            try:
                check_loss_mode(loss.loss_mode, loss.use_policy_gradient)
            except ValueError as error:
                raise FieldError(
                    "distillation_loss.loss_mode", loss.loss_mode, str(error).split("; ", 1)[-1]
                ) from None
        elif loss.use_policy_gradient:
            raise FieldError(
                "distillation_loss.use_policy_gradient",
                True,
                "false with distillation.as_advantage (the estimate is already an advantage "
                "of the actor's policy loss)",
            )
