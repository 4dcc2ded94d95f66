"""verl's reward model section, read while `reward_model.enable` (verl <= 0.7.0, top level)
or `reward.reward_model.enable` (0.7.1+) is on (verl_sections.SWITCHES).

Its reward loop serves the model with an inference engine (`rollout.*`), and so does rl
(`rl.core.workers.reward_model_server`): a discriminative model (no custom reward
function) as a classifier reading the chat as the loop renders it, a generative one (with
a custom reward function) behind an OpenAI-compatible endpoint; in the trainer's process
or on a resource pool of its own. The engine's tuning keys change memory and speed, not
scores, and are ignored; the sampling keys of its `rollout` section are not read by
verl's loop either (the custom function sends its own)."""

from __future__ import annotations

from typing import Any

from rl.cli.dialects.mapping import Rule, ignore, ignored_for, off_when
from rl.cli.dialects.vocabulary import ENGINE_INTERNAL, PROFILING

_TARGET = "reward.reward_model."
_UNREAD = (
    "a sampling default of the reward model's engine that verl's reward loop does not read: "
    "a generative reward model's function sends its own sampling with each request"
)
_LEGACY_WORKER = (
    "a layout or speed option of verl's legacy reward-model worker; rl's reward model runs "
    "inference only, batched by reward.reward_model.batch_size"
)


def _dtype(value: Any) -> Any:
    return {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}.get(value, value)


def rules(prefix: str) -> list[Rule]:
    """The rules of one layout: `reward_model.` (verl <= 0.7.0) or `reward.reward_model.`."""
    rollout = prefix + "rollout."
    placed = ("enable_resource_pool", "n_gpus_per_node", "nnodes")
    return [
        *[Rule(prefix + key, _TARGET + key) for key in placed],
        Rule(rollout + "name", _TARGET + "rollout.name"),
        Rule(rollout + "dtype", _TARGET + "rollout.dtype", convert=_dtype),
        *[
            Rule(rollout + key, _TARGET + "rollout." + key)
            for key in (
                "gpu_memory_utilization",
                "tensor_model_parallel_size",
                "max_model_len",
                "prompt_length",
                "response_length",
            )
        ],
        Rule(
            rollout + "skip_tokenizer_init",
            reason="verl's reward model needs its tokenizer (verl asserts it is not skipped)",
            convert=off_when(False),
        ),
        Rule(
            rollout + "quantization",
            reason="a quantized reward model is not in rl",
            convert=off_when(None),
        ),
        Rule(
            rollout + "quantization_config_file",
            reason="a quantized reward model is not in rl",
            convert=off_when(None),
        ),
        Rule(
            rollout + "limit_images",
            reason="a multi-modal reward model is not in rl",
            convert=off_when(None),
        ),
        Rule(
            rollout + "data_parallel_size",
            reason="a data-parallel engine per replica: rl's replicas are "
            "reward.reward_model.n_gpus_per_node * nnodes / tensor_model_parallel_size",
            convert=off_when(1),
        ),
        *ignored_for(
            _UNREAD,
            *(
                rollout + key
                for key in ("temperature", "top_k", "top_p", "do_sample", "n", "ignore_eos")
            ),
        ),
        ignore(rollout + "seed", "the engine's seed; a request's seed is the function's"),
        ignore(rollout, ENGINE_INTERNAL),
        ignore(prefix + "profiler.", PROFILING),
    ]


LEGACY: list[Rule] = [
    *rules("reward_model."),
    ignore(
        "reward_model.use_reward_loop",
        "verl's switch between its reward loop and its legacy reward-model worker; rl "
        "renders the chat through the reward model's template as the reward loop does",
    ),
    ignore(
        "reward_model.num_workers",
        "verl's reward-loop workers: rl scores in the trainer's process unless rl's "
        "reward.num_workers (a process pool) is set",
    ),
    ignore(
        "reward_model.model.input_tokenizer",
        "rl renders the prompt's chat and the response through the reward model's own chat "
        "template (what verl does when the two templates differ, and means when they agree)",
    ),
    Rule(
        "reward_model.model.external_lib",
        reason="a model class from an external library is not in rl",
        convert=off_when(None),
    ),
    Rule(
        "reward_model.model.override_config",
        reason="rl loads the reward model's config as its folder has it",
        convert=off_when({}, None),
    ),
    Rule(
        "reward_model.model.trust_remote_code",
        reason="rl loads reward models of transformers' own classes",
        convert=off_when(False, None),
    ),
    *ignored_for(
        _LEGACY_WORKER,
        "reward_model.strategy",
        "reward_model.model.use_shm",
        "reward_model.model.use_remove_padding",
        "reward_model.model.use_fused_kernels",
        "reward_model.model.fsdp_config.",
        "reward_model.micro_batch_size",
        "reward_model.use_dynamic_bsz",
        "reward_model.forward_max_token_len_per_gpu",
        "reward_model.ulysses_sequence_parallel_size",
    ),
    Rule(
        "reward_model.reward_loop_source",
        reason="a reward manager loaded from a file is not in rl",
        convert=off_when("register", None),
    ),
    ignore(
        "reward_model.reward_loop_module_path",
        "read only with reward_loop_source: importlib (refused)",
    ),
    ignore(
        "reward_model.reward_loop_class_name",
        "read only with reward_loop_source: importlib (refused)",
    ),
]

CURRENT: list[Rule] = rules("reward.reward_model.")
