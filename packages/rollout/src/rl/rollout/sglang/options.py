"""`rollout.*` (verl key names) -> the keyword arguments of SGLang's `Engine` (its ServerArgs).

| rollout key                 | ServerArgs                                                 |
|-----------------------------|------------------------------------------------------------|
| dtype                       | dtype ("auto" keeps the checkpoint's)                      |
| tensor_parallel_size        | tp_size                                                    |
| gpu_memory_utilization      | mem_fraction_static                                        |
| max_num_seqs                | max_running_requests                                       |
| max_num_batched_tokens      | max_prefill_tokens, and chunked_prefill_size when          |
|                             | enable_chunked_prefill (else chunked_prefill_size = -1)    |
| max_model_len               | context_length (None: max prompt + max response length)    |
| enforce_eager               | disable_cuda_graph                                         |
| enable_prefix_caching       | disable_radix_cache = not enable_prefix_caching            |
| load_format                 | load_format ("dummy": random weights until the first sync) |
| free_cache_engine           | enable_memory_saver (needed by sleep()/wake())             |
| seed                        | random_seed                                                |

vLLM's `max_num_batched_tokens` is the token budget of one scheduler step. SGLang splits it
in two: `max_prefill_tokens` bounds the tokens of one prefill batch and
`chunked_prefill_size` the chunk a long prompt is cut into; both get the budget, so a step
never prefills more than it, and turning chunked prefill off is SGLang's -1.

The engine also sets `model_path`, `skip_tokenizer_init=True` (token ids in and out) and
`trust_remote_code`. `engine_kwargs.sglang` (attention_backend, cuda_graph_max_bs,
enable_torch_compile, torch_compile_max_bs, enable_weights_cpu_backup, ...) is passed
through verbatim; a key there that one of the above already sets is refused, naming both.
"""

from __future__ import annotations

from typing import Any

from rl.core.config import RolloutConfig
from rl.core.errors import UserError

ENGINE_SET = "engine"  # origin of the settings the engine fixes


class EngineKwargsCollisionError(UserError, ValueError):
    """`engine_kwargs.sglang` repeats a ServerArgs key that a `rollout.*` key already maps to."""


def mapped_server_args(rollout: RolloutConfig, context_length: int) -> dict[str, tuple[str, Any]]:
    """ServerArgs key -> (the rollout key it comes from, value), for the mapped settings."""
    budget = rollout.max_num_batched_tokens
    return {
        "dtype": ("rollout.dtype", rollout.dtype),
        "tp_size": ("rollout.tensor_parallel_size", rollout.tensor_parallel_size),
        "mem_fraction_static": ("rollout.gpu_memory_utilization", rollout.gpu_memory_utilization),
        "max_running_requests": ("rollout.max_num_seqs", rollout.max_num_seqs),
        "max_prefill_tokens": ("rollout.max_num_batched_tokens", budget),
        "chunked_prefill_size": (
            "rollout.max_num_batched_tokens / rollout.enable_chunked_prefill",
            budget if rollout.enable_chunked_prefill else -1,
        ),
        "context_length": ("rollout.max_model_len", rollout.max_model_len or context_length),
        "disable_cuda_graph": ("rollout.enforce_eager", rollout.enforce_eager),
        "disable_radix_cache": ("rollout.enable_prefix_caching", not rollout.enable_prefix_caching),
        "load_format": ("rollout.load_format", rollout.load_format),
        "enable_memory_saver": ("rollout.free_cache_engine", rollout.free_cache_engine),
        "random_seed": ("rollout.seed", rollout.seed),
    }


def server_args(
    rollout: RolloutConfig,
    model_path: str,
    context_length: int,
    trust_remote_code: bool = False,
) -> dict[str, Any]:
    """The keyword arguments of `sglang.Engine(...)` for `rollout` serving `model_path`.

    `context_length` is used when `rollout.max_model_len` is None (the caller passes
    data.max_prompt_length + data.max_response_length).
    """
    sources = mapped_server_args(rollout, context_length)
    sources["model_path"] = (ENGINE_SET, model_path)
    sources["skip_tokenizer_init"] = (ENGINE_SET, True)
    sources["trust_remote_code"] = ("model.trust_remote_code", trust_remote_code)
    extra = rollout.engine_options("sglang")
    for key in extra:
        if key in sources:
            origin = sources[key][0]
            where = "the SGLang engine itself" if origin == ENGINE_SET else origin
            raise EngineKwargsCollisionError(
                f"rollout.engine_kwargs.sglang.{key} collides with {where}, which already sets "
                f"SGLang's {key}; drop engine_kwargs.sglang.{key}"
            )
    return {key: value for key, (_, value) in sources.items()} | extra
