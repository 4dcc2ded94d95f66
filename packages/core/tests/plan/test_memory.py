"""The memory formulas against figures worked out by hand and published ones, colocated
roles taking turns, and the fit refusals naming the key."""

from __future__ import annotations

import json

import pytest
import torch

from rl.core.config import ConfigError, load_config
from rl.core.models.shapes import model_shape, shape_config
from rl.core.plan import check_plan, make_plan
from rl.core.plan.memory import (
    Layer,
    RoleMemory,
    Sharding,
    activation_bytes,
    device_peak,
    forward_only_bytes,
    kv_cache_bytes,
    logits_bytes,
    state_bytes,
)
from rl.core.plan.model_dims import dims_from_hf

QWEN_0_5B = Layer(layers=24, hidden=896, intermediate=4864, kv_dim=2 * 64, vocab=151936)
P = 494_032_768  # Qwen2.5-0.5B


def test_kv_cache_of_qwen2_5_0_5b_is_12_kib_per_token():
    """2 (K, V) × 24 layers × 2 KV heads × 64 × 2 bytes = 12,288 bytes a token in bf16;
    TP 2 splits the heads."""
    assert kv_cache_bytes(QWEN_0_5B, 1, 2, 1) == 12_288
    assert kv_cache_bytes(QWEN_0_5B, 1000, 2, 2) == 6_144_000


def test_fsdp_state_is_sharded_and_keeps_the_model_dtype():
    """bf16 over 8 shards: params 2P/8 (+ the gathered units), grads 2P/8, AdamW 4P/8."""
    weights, grads, optim = state_bytes(
        P, 2, Sharding("fsdp", 8, 8, gathered=100), with_optimizer=True
    )
    assert (weights, grads, optim) == (2 * (P // 8) + 200, 2 * (P // 8), 4 * (P // 8))


def test_megatron_keeps_fp32_master_and_moments_sharded_over_dp():
    """bf16, TP 2, 4 DP ranks, distributed optimizer: params 2 × P/2, fp32 grads 4 × P/2,
    (4 master + 8 moments) × P/2 / 4."""
    shard = P // 2
    got = state_bytes(
        P, 2, Sharding("megatron", 2, 4, distributed_optimizer=True), with_optimizer=True
    )
    assert got == (2 * shard, 4 * shard, 12 * shard // 4)
    fp32 = state_bytes(P, 4, Sharding("megatron", 2, 4), with_optimizer=True)
    assert fp32[2] == 8 * shard  # fp32 params are their own master copy


def test_activations_with_and_without_checkpointing_by_hand():
    """A Qwen2.5-0.5B layer keeps 4h + 3q + 2kv + 4i = 3584 + 2688 + 256 + 19456 = 25,984
    elements a token (q = h here); the final norm 2h."""
    per_token = 25_984
    assert QWEN_0_5B.per_token == per_token
    assert activation_bytes(QWEN_0_5B, 1000, 2, False) == 2 * 1000 * (per_token * 24 + 2 * 896)
    with_checkpoints = 2 * 1000 * (896 * 24 + 2 * 896 + per_token)
    assert activation_bytes(QWEN_0_5B, 1000, 2, True) == with_checkpoints


def test_a_forward_only_pass_keeps_one_layers_live_set():
    """(2h + 3i) × b a token: (1792 + 14592) × 2 × 1000."""
    assert forward_only_bytes(QWEN_0_5B, 1000, 2) == 16_384 * 2 * 1000


def _saved_bytes(model, ids):
    """Bytes of the tensors autograd saves for backward in a forward of `ids` (each storage
    once, parameters excluded): the independent count the formula is held to."""
    saved = {}

    def pack(tensor):
        saved[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        model.model(input_ids=ids)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    return sum(size for ptr, size in saved.items() if ptr not in params)


@pytest.mark.parametrize("shape", ["qwen2.5-0.5b", "qwen3-0.6b", "llama-3.2-1b"])
@pytest.mark.parametrize("checkpointing", [False, True])
def test_activation_formula_against_the_tensors_a_forward_saves(shape, checkpointing):
    """transformers' model (random weights, narrow, 2 layers, sdpa) in fp32 on CPU saves
    what the formula counts (within 5 %) plus, at most, the attention probabilities that
    torch's CPU attention may keep (heads × seq² a row; flash attention on GPU keeps none).
    With checkpointing a forward saves only the layers' inputs: the formula's one extra
    layer is its recomputation in backward, which a forward does not show."""
    from transformers import AutoConfig, AutoModelForCausalLM

    hf = shape_config(model_shape(shape), num_layers=2, hidden_size=256, intermediate_size=704)
    hf["vocab_size"] = 512
    config = AutoConfig.for_model(**hf)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    if checkpointing:
        model.gradient_checkpointing_enable()
        model.train()
    rows, seq = 4, 128
    saved = _saved_bytes(model, torch.randint(0, 512, (rows, seq)))
    layer = dims_from_hf(hf).layer()
    counted = activation_bytes(layer, rows * seq, 4, checkpointing)
    probabilities = 0
    if checkpointing:
        counted -= 4 * rows * seq * layer.per_token
    else:
        probabilities = 4 * rows * config.num_attention_heads * seq * seq * layer.layers
    assert 0.95 * counted <= saved <= 1.05 * (counted + probabilities)


def test_logits_only_off_the_fused_path():
    assert logits_bytes(151936, 10, fused=False, training=True) == 12 * 10 * 151936
    assert logits_bytes(151936, 10, fused=False, training=False) == 8 * 10 * 151936
    assert logits_bytes(151936, 10, fused=True, training=True) == 0


def test_colocated_roles_take_turns_and_offloaded_ones_keep_nothing():
    actor = RoleMemory("actor", parameters=10, optimizer=20, activations=50, resident=30)
    rollout = RoleMemory("rollout", parameters=10, kv_cache=70, resident=0)
    # rollout: 80 + the actor's resident 30; actor: 80 + nothing of the sleeping rollout
    assert device_peak({"actor": actor, "rollout": rollout}) == (110, "rollout")
    kept = RoleMemory("rollout", parameters=10, kv_cache=70, resident=80)
    assert device_peak({"actor": actor, "rollout": kept}) == (160, "actor")


@pytest.fixture
def qwen_folder(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps(shape_config(model_shape("qwen2.5-0.5b"), num_layers=24))
    )
    return tmp_path


def _gpu(folder, *more):
    return [
        f"model.path={folder}",
        "model.dtype=bfloat16",
        "trainer.device=cuda",
        "trainer.launcher=ray",
        "cluster.n_gpus_per_node=8",
        "cluster.device_memory_gb=80",
        "data.train_batch_size=256",
        "data.max_prompt_length=512",
        "data.max_response_length=1024",
        "actor.ppo_mini_batch_size=64",
        "actor.ppo_micro_batch_size_per_gpu=16",
        "rollout.n=5",
        *more,
    ]


def test_qwen_0_5b_on_8_gpus_fits_80_gib_and_states_its_parts(qwen_folder):
    plan = check_plan(load_config(None, _gpu(qwen_folder, "model.gradient_checkpointing=true")))
    assert plan is not None and plan.params.total == P
    (group,) = plan.devices
    actor = group.phases["actor"]
    assert actor.optimizer == 4 * (P // 8)
    assert actor.logits == 0  # fused on GPU by default
    assert group.peak < 80 * 1024**3


def test_an_activation_overflow_names_the_micro_batch_key(qwen_folder):
    config = load_config(None, _gpu(qwen_folder, "cluster.device_memory_gb=8"))
    with pytest.raises(ConfigError, match="actor.ppo_micro_batch_size_per_gpu"):
        check_plan(config)


def test_unfused_logits_overflow_names_use_fused_kernels(qwen_folder):
    more = ["actor.use_fused_kernels=false", "model.gradient_checkpointing=true"]
    config = load_config(
        None,
        _gpu(
            qwen_folder,
            *more,
            "actor.ppo_micro_batch_size_per_gpu=40",
            "cluster.device_memory_gb=30",
        ),
    )
    with pytest.raises(ConfigError, match="actor.use_fused_kernels=true"):
        check_plan(config)


def test_a_kv_cache_that_cannot_hold_one_sequence_names_gpu_memory_utilization(qwen_folder):
    more = [
        "rollout.name=vllm",
        "rollout.gpu_memory_utilization=0.04",  # 0.8 GiB < 0.92 GiB of weights
        "cluster.device_memory_gb=20",
    ]
    config = load_config(None, _gpu(qwen_folder, "model.gradient_checkpointing=true", *more))
    with pytest.raises(ConfigError, match="rollout.gpu_memory_utilization"):
        check_plan(config)


def test_without_a_gpu_or_a_memory_key_the_fit_is_not_checked(qwen_folder):
    overrides = [o for o in _gpu(qwen_folder) if not o.startswith("cluster.device_memory_gb")]
    plan = make_plan(load_config(None, overrides))
    assert plan.device_bytes is None or plan.device_source.endswith("(torch.cuda)")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_model_state_against_a_real_adamw_step(dtype):
    """Parameters, gradients and AdamW's moments after one step of the demo model, counted
    from the tensors themselves (torch's AdamW keeps its moments in the parameters' dtype;
    its per-parameter step counters are left out)."""
    from rl.core.models.loading import load_causal_lm, load_tokenizer

    config = load_config(None, [])
    model = load_causal_lm(config.model, load_tokenizer(config.model)).to(dtype)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(input_ids=torch.randint(0, 40, (2, 8))).logits.float().sum().backward()
    optimizer.step()
    params = list(model.parameters())
    nbytes = lambda tensors: sum(t.numel() * t.element_size() for t in tensors)  # noqa: E731
    moments = [t for state in optimizer.state.values() for k, t in state.items() if k != "step"]
    size = torch.finfo(dtype).bits // 8
    total = parameter_counts_of(config)
    expected = state_bytes(total, size, Sharding("fsdp"), with_optimizer=True)
    assert (nbytes(params), nbytes(p.grad for p in params), nbytes(moments)) == expected


def parameter_counts_of(config):
    from rl.core.plan import model_dims, parameter_counts

    return parameter_counts(model_dims(config)).total


def test_cpu_workers_share_the_machine_memory():
    """trainer.device=cpu with 2 Ray workers: each fits 1.5 × its peak, both together do
    not; the refusal counts the workers."""
    overrides = ["trainer.launcher=ray", "cluster.n_gpus_per_node=2"]
    (group,) = make_plan(load_config(None, overrides)).devices
    memory_gb = 1.5 * group.peak / 1024**3
    config = load_config(None, [*overrides, f"cluster.device_memory_gb={memory_gb}"])
    with pytest.raises(ConfigError, match=r"the 2 worker process\(es\) need ~"):
        check_plan(config)


def test_vllm_on_cpu_reserves_one_generations_rows_or_the_env_space(qwen_folder, monkeypatch):
    """rl.rollout's vLLM on CPU asks for one generation's full-length rows of KV cache, at
    most max_num_seqs (64 × 1536 × 12 KiB in bf16), VLLM_CPU_KVCACHE_SPACE GiB when that
    is set."""
    overrides = [
        f"model.path={qwen_folder}",
        "model.dtype=bfloat16",
        "rollout.name=vllm",
        "rollout.max_num_seqs=64",
        "data.max_prompt_length=512",
        "data.max_response_length=1024",
    ]
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    (group,) = make_plan(load_config(None, overrides)).devices
    assert group.phases["rollout"].kv_cache == 64 * 1536 * 12_288
    # a step of fewer rows than max_num_seqs: room for the step's rows (prompts x n) alone
    step = [*overrides, "rollout.max_num_seqs=1024", "data.train_batch_size=8", "rollout.n=2"]
    (group,) = make_plan(load_config(None, step)).devices
    assert group.phases["rollout"].kv_cache == 16 * 1536 * 12_288
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "3")
    (group,) = make_plan(load_config(None, overrides)).devices
    assert group.phases["rollout"].kv_cache == 3 * 1024**3
