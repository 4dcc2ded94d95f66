"""`rollout.*` (verl names) -> vLLM `EngineArgs` keyword arguments.

`engine_kwargs.vllm` passes any other `EngineArgs` field through unchanged; a key that
a `rollout.*` setting already maps is refused, naming both, so one setting never has
two values.
"""

from __future__ import annotations

from typing import Any

from rl.core.config import Config
from rl.core.config.errors import ConfigError
from rl.core.config.schema import cpu_vllm_kv_rows

# rollout.<key> -> EngineArgs field, copied as they are
DIRECT = {
    "tensor_parallel_size": "tensor_parallel_size",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "max_num_seqs": "max_num_seqs",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "enforce_eager": "enforce_eager",
    "enable_prefix_caching": "enable_prefix_caching",
    "enable_chunked_prefill": "enable_chunked_prefill",
    "load_format": "load_format",
    "seed": "seed",
}
# What the trainer recomputes is log_softmax(logits / T): vLLM's "processed" log-probs
# are that (after temperature; also after top-p/top-k and penalties when those are on).
LOGPROBS_MODE = "processed_logprobs"


def max_model_len(config: Config) -> int:
    rollout, data = config.rollout, config.data
    return rollout.max_model_len or data.max_prompt_length + data.max_response_length


def kv_cache_bytes(hf_config: Any, tokens: int, dtype_bytes: int) -> int:
    """Bytes of K and V for `tokens` tokens of this model (all layers)."""
    heads = getattr(hf_config, "num_key_value_heads", None) or hf_config.num_attention_heads
    head_dim = getattr(hf_config, "head_dim", None) or (
        hf_config.hidden_size // hf_config.num_attention_heads
    )
    return 2 * hf_config.num_hidden_layers * heads * head_dim * dtype_bytes * tokens


def check_tensor_parallel(config: Config) -> None:
    """Tensor parallelism needs a rollout worker of its own (ConfigError otherwise)."""
    tp = config.rollout.tensor_parallel_size
    if tp > 1 and not runs_apart(config):
        # vLLM would start TP worker processes beside the trainer's ranks, which hold the
        # devices; a rollout replica on devices of its own starts them in its Ray worker.
        raise ConfigError(
            f"rollout.tensor_parallel_size = {tp}: a vLLM replica spanning {tp} devices runs "
            "in a rollout worker of its own: trainer.launcher=ray with the rollout placed on "
            "devices apart from the actor's (e.g. cluster.placement={actor: [0], rollout: "
            f"[1, 2]}}); or set rollout.tensor_parallel_size=1"
        )


def runs_apart(config: Config) -> bool:
    """Whether the rollout runs in Ray workers of its own (a disaggregated placement)."""
    if config.trainer.launcher != "ray":
        return False
    from rl.core.workers.launch import ray_layout

    layout = ray_layout(config)
    return layout is not None and layout.disaggregated


def cpu_binding(tp: int, cores: list[int]) -> str:
    """`VLLM_CPU_OMP_THREADS_BIND` for `tp` CPU workers over `cores` (this process's):
    consecutive equal shares, e.g. "0|1" or "0-3|4-7"."""
    if len(cores) < tp:
        raise ConfigError(
            f"rollout.tensor_parallel_size = {tp} on the CPU needs a core per worker; this "
            f"rollout worker may use {len(cores)} ({cores}): raise cluster.cpus_per_worker"
        )
    share = len(cores) // tp
    parts = [sorted(cores)[k * share : (k + 1) * share] for k in range(tp)]
    return "|".join(str(p[0]) if len(p) == 1 else f"{p[0]}-{p[-1]}" for p in parts)


def engine_args(
    config: Config, model_dir: str, dtype: str, *, on_cpu: bool, hf_config: Any
) -> dict[str, Any]:
    """Keyword arguments of `vllm.EngineArgs` for the rollout of `config`."""
    rollout = config.rollout
    check_tensor_parallel(config)
    args: dict[str, Any] = {name: getattr(rollout, key) for key, name in DIRECT.items()}
    length = max_model_len(config)
    args.update(
        model=model_dir,
        tokenizer=model_dir,
        skip_tokenizer_init=True,  # token ids in, token ids out
        dtype=dtype,
        max_model_len=length,
        logprobs_mode=LOGPROBS_MODE,
        trust_remote_code=config.model.trust_remote_code,
    )
    if on_cpu:
        # The CPU build sizes its KV cache from free RAM (GiBs) unless told: give it
        # room for the full-length rows one generation runs at once (a step's prompts x
        # rollout.n, at most max_num_seqs), at least 64 MiB. A larger batch (validation)
        # runs in waves. (max_num_seqs rows alone: 2.2 GiB at the 0.5B shape's 4 layers
        # for a step of 32 rows, which need 71 MiB.)
        size = 2 if dtype in ("bfloat16", "float16") else 4
        rows = cpu_vllm_kv_rows(config)
        need = kv_cache_bytes(hf_config, rows * length, size)
        args["kv_cache_memory_bytes"] = max(need, 64 << 20)
        if rollout.tensor_parallel_size > 1:
            args["distributed_executor_backend"] = "mp"  # one worker process per TP rank
    elif rollout.free_cache_engine:
        args["enable_sleep_mode"] = True
    extra = rollout.engine_options("vllm")
    for key in extra:
        if key in args:
            mapped = [f"rollout.{k}" for k, v in DIRECT.items() if v == key]
            owner = mapped[0] if mapped else "the vLLM engine itself"
            raise ConfigError(
                f"rollout.engine_kwargs.vllm.{key} is set by {owner}; set it there instead"
            )
    args.update(extra)
    return args
