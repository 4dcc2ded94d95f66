"""The vLLM engine's pure parts: version range, sampling and engine-argument mapping."""

import pytest

from rl.core.config import load_config
from rl.core.config.errors import ConfigError
from rl.core.engines import SamplingParams
from rl.core.imports import MissingDependencyError
from rl.core.models import load_model_config, load_tokenizer
from rl.rollout.vllm.options import engine_args, kv_cache_bytes
from rl.rollout.vllm.sampling import vllm_sampling_kwargs
from rl.rollout.vllm.version import SKIP_ENV, check_version, supported_range


def test_versions_parse_and_the_range_is_named_when_outside(monkeypatch):
    monkeypatch.delenv(SKIP_ENV, raising=False)
    check_version("0.32.0+cpu")  # the CPU build's local tag
    check_version("0.33.0rc1")  # a pre-release inside the range
    for outside in ("dev", "0.31.9", "0.35.0"):
        with pytest.raises(MissingDependencyError):
            check_version(outside)
    with pytest.raises(MissingDependencyError) as error:
        check_version("0.10.2")
    assert f"supports vllm{supported_range()}" in str(error.value)
    assert SKIP_ENV in str(error.value)
    monkeypatch.setenv(SKIP_ENV, "1")
    check_version("0.10.2")


def test_sampling_maps_each_convention():
    kwargs = vllm_sampling_kwargs(
        SamplingParams(
            n=3,
            temperature=0.7,
            top_p=0.9,
            top_k=0,
            max_new_tokens=5,
            min_new_tokens=2,
            stop_token_ids=(7, 1),
            seed=11,
            repetition_penalty=1.1,
        ),
        eos_token_id=1,
    )
    assert kwargs["top_k"] == -1  # 0 and -1 both mean off; vLLM reads -1
    assert kwargs["stop_token_ids"] == [1, 7]  # EOS first (no tokenizer in the engine), no dups
    assert (kwargs["max_tokens"], kwargs["min_tokens"], kwargs["seed"]) == (5, 2, 11)
    assert kwargs["logprobs"] == 0 and kwargs["detokenize"] is False
    assert kwargs["repetition_penalty"] == 1.1
    greedy = vllm_sampling_kwargs(SamplingParams(temperature=0.0, top_p=0.5, top_k=3), 1)
    assert (greedy["top_p"], greedy["top_k"]) == (1.0, -1)
    free = vllm_sampling_kwargs(SamplingParams(ignore_eos=True, stop_token_ids=(7,)), 1)
    assert free["stop_token_ids"] == [] and free["ignore_eos"] is True


def test_engine_args_use_the_rollout_keys_and_refuse_collisions():
    config = load_config(
        overrides=["rollout.max_num_seqs=8", "rollout.engine_kwargs.vllm.swap_space=1"]
    )
    hf_config = load_model_config(config.model, load_tokenizer(config.model))
    args = engine_args(config, "/m", "float32", on_cpu=True, hf_config=hf_config)
    assert args["max_model_len"] == config.data.max_prompt_length + config.data.max_response_length
    assert args["skip_tokenizer_init"] and args["logprobs_mode"] == "processed_logprobs"
    assert args["max_num_seqs"] == 8 and args["swap_space"] == 1
    need = kv_cache_bytes(hf_config, 8 * args["max_model_len"], 4)
    # 2 (K, V) x layers x kv heads x head_dim x 4 bytes per token
    assert need == 2 * 2 * 1 * 64 * 4 * 8 * args["max_model_len"]
    assert args["kv_cache_memory_bytes"] == max(need, 64 << 20)
    # max_num_seqs past a step's rows: room for the step's rows (prompts x n) alone
    step = load_config(
        overrides=["data.train_batch_size=8", "rollout.n=4", "data.max_prompt_length=4096"]
    )
    args = engine_args(step, "/m", "float32", on_cpu=True, hf_config=hf_config)
    assert step.rollout.max_num_seqs > 32 and args["max_num_seqs"] == step.rollout.max_num_seqs
    rows = kv_cache_bytes(hf_config, 32 * args["max_model_len"], 4)
    assert rows > 64 << 20 and args["kv_cache_memory_bytes"] == rows
    wide = load_config(overrides=["rollout.tensor_parallel_size=2"])
    with pytest.raises(ConfigError, match="rollout.tensor_parallel_size = 2: a vLLM replica"):
        engine_args(wide, "/m", "float32", on_cpu=True, hf_config=hf_config)
    apart = load_config(
        overrides=[
            "rollout.tensor_parallel_size=2",
            "trainer.launcher=ray",
            "cluster.n_gpus_per_node=3",
            "cluster.placement={actor: [0], rollout: [1, 2]}",
        ]
    )
    tp = engine_args(apart, "/m", "float32", on_cpu=True, hf_config=hf_config)
    assert tp["tensor_parallel_size"] == 2 and tp["distributed_executor_backend"] == "mp"
    clash = load_config(overrides=["rollout.engine_kwargs.vllm.max_num_seqs=4"])
    with pytest.raises(ConfigError, match="set by rollout.max_num_seqs"):
        engine_args(clash, "/m", "float32", on_cpu=True, hf_config=hf_config)


def test_the_config_checks_the_engine_keys():
    for override, key in [
        ("rollout.load_format=gguf", "rollout.load_format"),
        ("rollout.gpu_memory_utilization=0", "rollout.gpu_memory_utilization"),
        ("rollout.engine_kwargs.trt={}", "rollout.engine_kwargs"),
        ("rollout.max_model_len=4", "rollout.max_model_len"),
        ("rollout.dtype=int8", "rollout.dtype"),
    ]:
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            load_config(overrides=[override])


def test_tp_workers_bind_to_equal_shares_of_the_workers_cores():
    from rl.rollout.vllm.options import cpu_binding

    assert cpu_binding(2, [0, 1]) == "0|1"
    assert cpu_binding(2, [4, 5, 6, 7, 0, 1, 2, 3]) == "0-3|4-7"
    assert cpu_binding(1, [3]) == "3"
    with pytest.raises(ConfigError, match="raise cluster.cpus_per_worker"):
        cpu_binding(2, [0])
