"""verl's generation config (`verl/trainer/config/generation.yaml`, run by
`verl.trainer.main_generation`: n_samples responses to every prompt of a parquet, written
to another with a `responses` column) as ours for `rl generate --from verl`: composed by
Hydra as verl's other configs, mapped by this table; the responses come from rl's rollout
engine on the validation path (`rl.core.trainer.generate_responses`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rl.cli.dialects.mapping import Rule, Unsupported, as_list, ignore, ignored_for
from rl.cli.dialects.record import Table, Variant
from rl.cli.dialects.vocabulary import DATACLASS_PATH, ENGINE_INTERNAL

_ACTOR = (
    "verl builds its generation worker from an actor config; rl generates with the rollout "
    "engine alone"
)
_ROLLOUT = (
    "a rollout-engine option rl chooses itself (engine-specific ones go in "
    "rollout.engine_kwargs.vllm / .sglang)"
)


def _temperature(flat: Mapping[str, Any]) -> Any:
    """verl samples at `temperature` while `do_sample` (the HF rollout's switch), else
    greedily: rl's temperature 0."""
    if flat.get("rollout.do_sample", True) is False:
        return 0.0
    return flat.get("rollout.temperature")


def _top_k(value: Any) -> Any:
    """verl's 0 (HF) and -1 (vLLM) both mean no top-k cut: rl's -1."""
    return -1 if value in (0, -1, None) else value


def _single_response(value: Any) -> Any:
    if value in (None, 1):
        return None
    return Unsupported(
        f"rollout.n = {value}: verl's generation samples data.n_samples times with n 1 "
        "(set data.n_samples)"
    )


def _rollout_name(value: Any) -> Any:
    if value in ("hf", "vllm", "sglang"):
        return value
    return Unsupported(f"rollout.name {value!r}: rl's engines are hf, vllm and sglang")


RULES: list[Rule] = [
    ignore("**._target_", DATACLASS_PATH),
    Rule("trainer.nnodes", "cluster.nnodes"),
    Rule("trainer.n_gpus_per_node", "cluster.n_gpus_per_node"),
    Rule("trainer.device", "trainer.device"),
    Rule(
        "data.path",
        "data.val_files",
        convert=as_list,
        also=(("data.train_files", lambda flat: as_list(flat.get("data.path"))),),
    ),
    Rule("data.prompt_key", "data.prompt_key"),
    Rule("data.n_samples", "rollout.val_kwargs.n"),
    Rule("data.batch_size", "data.val_batch_size"),
    ignore(
        "data.output_path", "where rl generate writes the table (the input rows and `responses`)"
    ),
    Rule("data.trust_remote_code", "model.trust_remote_code"),
    Rule("model.path", "model.path"),
    Rule("model.trust_remote_code", "model.trust_remote_code"),
    Rule(
        "model.external_lib",
        reason="rl imports custom models through its registry",
        convert=lambda value: value or None,
    ),
    Rule("rollout.name", "rollout.name", convert=_rollout_name),
    Rule("rollout.temperature", "rollout.val_kwargs.temperature", derive=_temperature),
    ignore("rollout.do_sample", "read with rollout.temperature"),
    Rule("rollout.top_k", "rollout.val_kwargs.top_k", convert=_top_k),
    Rule("rollout.top_p", "rollout.val_kwargs.top_p"),
    Rule("rollout.prompt_length", "data.max_prompt_length"),
    Rule("rollout.response_length", "data.max_response_length"),
    Rule("rollout.tensor_model_parallel_size", "rollout.tensor_parallel_size"),
    Rule("rollout.gpu_memory_utilization", "rollout.gpu_memory_utilization"),
    Rule("rollout.n", reason="verl samples data.n_samples times", convert=_single_response),
    Rule(
        "rollout.ignore_eos",
        reason="rl stops a response at the end-of-sequence token",
        convert=lambda value: None if value in (None, False) else value,
    ),
    ignore("rollout.", _ROLLOUT),
    ignore("actor.", _ACTOR),
    *ignored_for(ENGINE_INTERNAL, "ray_kwargs.", "ray_init."),
]


def is_generation(values: Mapping[str, Any]) -> bool:
    """verl's generation config: data.n_samples and data.output_path, no trainer roles."""
    data = values.get("data")
    return (
        "actor_rollout_ref" not in values
        and isinstance(data, dict)
        and "n_samples" in data
        and "output_path" in data
    )


VARIANT = Variant(
    Table("verl_generation", RULES),
    job="generate",
    applies=is_generation,
    note="verl's generation config: run it with `rl generate --from verl`",
)
