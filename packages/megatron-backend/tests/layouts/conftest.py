"""Tiny real Hugging Face checkpoints, and a CPU-only megatron-core world, for the layout tests."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

TINY = dict(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    intermediate_size=128,
    vocab_size=256,
)
MOE = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)
ARCHS = {"llama": {}, "qwen2": {}, "qwen3": {}, "qwen3_moe": MOE}

Checkpoint = tuple[Any, torch.nn.Module, dict[str, torch.Tensor]]


def _build(tmp_dir: str, model_type: str, overrides: dict[str, Any]) -> Checkpoint:
    """A random tiny model and its tensors as `save_pretrained` writes them (checkpoint names)."""
    transformers = pytest.importorskip("transformers")
    from safetensors.torch import load_file

    config = transformers.AutoConfig.for_model(
        model_type, **{**TINY, **ARCHS.get(model_type, {}), **overrides}
    )
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    model.save_pretrained(tmp_dir)
    return config, model, load_file(os.path.join(tmp_dir, "model.safetensors"))


@pytest.fixture(scope="session")
def tiny_hf(tmp_path_factory) -> Callable[..., Checkpoint]:
    """`tiny_hf(model_type, **config_overrides) -> (hf_config, hf_model, checkpoint tensors)`, cached."""
    built: dict[tuple, Checkpoint] = {}

    def get(model_type: str, **overrides: Any) -> Checkpoint:
        key = (model_type, tuple(sorted(overrides.items())))
        if key not in built:
            built[key] = _build(str(tmp_path_factory.mktemp(model_type)), model_type, overrides)
        return built[key]

    return get


def _patch_cuda_for_cpu(mp: pytest.MonkeyPatch) -> None:
    """megatron-core asks CUDA for a device and RNG state even with CPU initialisation:
    rl-megatron's CPU debug mode answers it, undone with `mp` (it answers megatron-core's
    calls only, so the other tests of the session see torch unchanged)."""
    from rl.megatron import cpu_mode

    for owner, name, replacement in cpu_mode.patches():
        mp.setattr(owner, name, replacement)


@pytest.fixture(scope="session")
def megatron_world(tmp_path_factory):
    """torch.distributed (gloo, world size 1) and megatron's TP=PP=1 groups, on CPU; torn down after."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pytest.importorskip("megatron.core", reason="megatron-core is not installed")
        from megatron.core import parallel_state
        from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
    import torch.distributed as dist

    with pytest.MonkeyPatch.context() as mp:
        _patch_cuda_for_cpu(mp)
        owns_group = not dist.is_initialized()
        if owns_group:
            store = tmp_path_factory.mktemp("dist") / "store"
            dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
        parallel_state.initialize_model_parallel(1, 1)
        model_parallel_cuda_manual_seed(0)
        yield
        parallel_state.destroy_model_parallel()
        # a vLLM engine's shutdown destroys the default group too, whoever made it
        if owns_group and dist.is_initialized():
            dist.destroy_process_group()
