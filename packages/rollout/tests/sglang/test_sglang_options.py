"""rollout.* -> SGLang ServerArgs keyword arguments: every mapped key, edge cases, collisions."""

import pytest

from rl.core.config import RolloutConfig
from rl.rollout.sglang.options import EngineKwargsCollisionError, server_args


def test_defaults_map_to_server_args():
    args = server_args(RolloutConfig(name="sglang"), "/models/qwen", context_length=40)
    assert args == {
        "model_path": "/models/qwen",
        "skip_tokenizer_init": True,
        "trust_remote_code": False,
        "dtype": "auto",
        "tp_size": 1,
        "mem_fraction_static": 0.5,
        "max_running_requests": 1024,
        "max_prefill_tokens": 8192,
        "chunked_prefill_size": 8192,
        "context_length": 40,
        "disable_cuda_graph": True,
        "disable_radix_cache": False,
        "load_format": "dummy",
        "enable_memory_saver": True,
        "random_seed": 0,
    }


def test_each_rollout_key_reaches_its_sglang_key():
    rollout = RolloutConfig(
        name="sglang",
        dtype="bfloat16",
        tensor_parallel_size=4,
        gpu_memory_utilization=0.85,
        max_num_seqs=64,
        max_num_batched_tokens=4096,
        max_model_len=2048,
        enforce_eager=False,
        enable_prefix_caching=False,
        enable_chunked_prefill=False,
        load_format="auto",
        free_cache_engine=False,
        seed=7,
    )
    args = server_args(rollout, "m", context_length=40, trust_remote_code=True)
    assert args["dtype"] == "bfloat16" and args["tp_size"] == 4
    assert args["mem_fraction_static"] == 0.85 and args["max_running_requests"] == 64
    assert args["max_prefill_tokens"] == 4096
    assert args["chunked_prefill_size"] == -1  # SGLang's "chunked prefill off"
    assert args["context_length"] == 2048  # max_model_len wins over the data lengths
    assert args["disable_cuda_graph"] is False and args["disable_radix_cache"] is True
    assert args["load_format"] == "auto" and args["enable_memory_saver"] is False
    assert args["random_seed"] == 7 and args["trust_remote_code"] is True


def test_engine_kwargs_pass_through_verbatim():
    extra = {
        "attention_backend": "fa3",
        "cuda_graph_max_bs": 32,
        "enable_torch_compile": True,
        "torch_compile_max_bs": 8,
        "enable_weights_cpu_backup": True,
    }
    rollout = RolloutConfig(name="sglang", engine_kwargs={"sglang": extra, "vllm": {"x": 1}})
    args = server_args(rollout, "m", context_length=40)
    assert {key: args[key] for key in extra} == extra
    assert "x" not in args  # the vllm section is not ours


@pytest.mark.parametrize(
    ("key", "origin"),
    [
        ("mem_fraction_static", "rollout.gpu_memory_utilization"),
        ("tp_size", "rollout.tensor_parallel_size"),
        ("chunked_prefill_size", "rollout.max_num_batched_tokens"),
        ("disable_radix_cache", "rollout.enable_prefix_caching"),
        ("random_seed", "rollout.seed"),
        ("skip_tokenizer_init", "the SGLang engine itself"),
        ("model_path", "the SGLang engine itself"),
    ],
)
def test_a_colliding_engine_kwarg_is_refused_naming_both(key, origin):
    rollout = RolloutConfig(name="sglang", engine_kwargs={"sglang": {key: 1}})
    with pytest.raises(EngineKwargsCollisionError) as error:
        server_args(rollout, "m", context_length=40)
    assert f"rollout.engine_kwargs.sglang.{key}" in str(error.value)
    assert origin in str(error.value)
