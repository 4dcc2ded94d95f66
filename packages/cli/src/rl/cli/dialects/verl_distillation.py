"""verl 0.9.1's `distillation` section (on-policy distillation), read only while
`distillation.enabled` (verl_sections.SWITCHES): one teacher, its log-prob pass run by rl's
train backend on the actor's devices; verl's loss keys keep their names."""

from __future__ import annotations

from typing import Any

from rl.cli.dialects.mapping import Rule, Unsupported, flatten, ignore, ignored_for
from rl.cli.dialects.switches import truthy, value_at
from rl.core.algorithms.distillation import ESTIMATOR_LOSS_MODES, REFUSED_LOSS_MODES
from rl.core.config.errors import ConfigError

_TEACHER = "distillation.teacher_models.teacher_model."
_ON_ACTOR = (
    "verl's teacher resource pool and inference server: rl's teacher runs its log-prob "
    "pass on the train backend (actor.strategy) on the actor's devices, taking turns with it"
)


def _loss_mode(value: Any) -> Any:
    if value in REFUSED_LOSS_MODES:
        return Unsupported(f"verl's {value} distillation loss: {REFUSED_LOSS_MODES[value]}")
    if value not in ESTIMATOR_LOSS_MODES:
        return Unsupported(f"distillation loss {value!r} (rl: {', '.join(ESTIMATOR_LOSS_MODES)})")
    return value


def _teacher_dtype(value: Any) -> Any:
    """verl's teacher inference dtype (the rollout's by default); `auto`: the model's."""
    return None if value in (None, "auto") else value


RULES: list[Rule] = [
    Rule("distillation.enabled", "distillation.enabled"),
    Rule(
        "distillation.distillation_loss.loss_mode",
        "distillation.distillation_loss.loss_mode",
        convert=_loss_mode,
    ),
    *ignored_for(
        "a memory option of forward_kl_topk, which rl does not run",
        "distillation.distillation_loss.use_chunked_topk",
        "distillation.distillation_loss.chunked_topk_chunk_size",
    ),
    Rule("distillation.distillation_loss.", "distillation.distillation_loss."),
    Rule(_TEACHER + "model_path", "distillation.teacher_model.model_path"),
    Rule(_TEACHER + "inference.dtype", "distillation.teacher_model.dtype", convert=_teacher_dtype),
    ignore(
        _TEACHER + "inference.temperature",
        "rl's teacher scores at rollout.temperature, verl's default (a different one is refused)",
    ),
    ignore(_TEACHER + "key", "the routing key of several teachers; rl has one"),
    ignore(_TEACHER + "num_replicas", _ON_ACTOR),
    ignore(_TEACHER + "inference.", _ON_ACTOR),
    *ignored_for(_ON_ACTOR, "distillation.n_gpus_per_node", "distillation.nnodes"),
    ignore("distillation.teacher_key", "routes rows among several teachers; rl has one"),
    Rule(
        "distillation.teacher_models.",
        reason="several teachers (routed by distillation.teacher_key) are not in rl: give "
        "the one teacher as distillation.teacher_models.teacher_model",
    ),
]


def check(values: dict[str, Any]) -> None:
    """A teacher that would score at another temperature than the student sampled at:
    rl's teacher uses rollout.temperature (verl's default interpolates it)."""
    if not truthy(value_at(values, "distillation.enabled")):
        return
    flat = dict(flatten(values))
    teacher = flat.get(_TEACHER + "inference.temperature")
    rollout = flat.get("actor_rollout_ref.rollout.temperature")
    if teacher is not None and rollout is not None and float(teacher) != float(rollout):
        raise ConfigError(
            f"{_TEACHER}inference.temperature = {teacher!r} is not the rollout's "
            f"({rollout!r}): rl's teacher scores the samples at "
            "actor_rollout_ref.rollout.temperature; set the two equal"
        )
