"""`GatedDown`: a SwiGLU MLP's forward as transformers runs it, its gradients as autograd
gives them, with two of its four [tokens, intermediate] activations no longer saved."""

import copy
import functools

import pytest
import torch
from transformers import Qwen2Config
from transformers.models.qwen2.modeling_qwen2 import Qwen2MLP

from rl.fsdp.gated_mlp import use_gated_mlps


def _mlps():
    config = Qwen2Config(hidden_size=32, intermediate_size=96, hidden_act="silu")
    torch.manual_seed(0)
    plain = Qwen2MLP(config)
    gated = copy.deepcopy(plain)
    holder = torch.nn.Module()
    holder.config, holder.mlp = config, gated
    assert use_gated_mlps(holder) == 1
    return plain, gated


def _saved_bytes(module, x):
    saved = []

    def pack(tensor):
        if not isinstance(tensor, torch.nn.Parameter):
            saved.append(tensor.numel() * tensor.element_size())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = module(x)
    return out, sum(saved)


def test_the_same_outputs_and_gradients_with_half_the_activations():
    plain, gated = _mlps()
    x = torch.randn(2, 7, 32, requires_grad=True)
    y = x.detach().clone().requires_grad_(True)
    want, want_saved = _saved_bytes(plain, x)
    got, got_saved = _saved_bytes(gated, y)
    assert torch.equal(got, want)  # the same ops in the same order
    grad = torch.randn_like(want)
    want.backward(grad)
    got.backward(grad)
    # autograd's own silu derivative and the same matmuls: the same bits
    assert torch.equal(y.grad, x.grad)
    for (name, p), q in zip(plain.named_parameters(), gated.parameters(), strict=True):
        assert torch.equal(q.grad, p.grad), name
    # plain saves gate, up, silu(gate), the product and x (and silu's input again);
    # gated saves gate, up and x: two [14, 96] float32 tensors (or more) fewer
    assert want_saved - got_saved >= 2 * 14 * 96 * 4


def test_other_activations_and_wrapped_projections_keep_their_forward():
    config = Qwen2Config(hidden_size=32, intermediate_size=96, hidden_act="gelu")
    holder = torch.nn.Module()
    holder.config, holder.mlp = config, Qwen2MLP(config)
    assert use_gated_mlps(holder) == 0
    config = Qwen2Config(hidden_size=32, intermediate_size=96, hidden_act="silu")
    holder.config, holder.mlp = config, Qwen2MLP(config)
    holder.mlp.up_proj = torch.nn.Sequential(holder.mlp.up_proj)  # as a LoRA wrapper is
    assert use_gated_mlps(holder) == 0


@pytest.mark.parametrize("fused", [True, False])
def test_the_trained_engine_takes_it_with_the_fused_kernels_only(fused):
    """`actor.use_fused_kernels` flips it: the actor's MLPs keep gate and up alone with the
    fused kernels, and run transformers' own forward without them."""
    from rl.core.config import OptimConfig, load_config
    from rl.core.models import load_causal_lm, load_tokenizer
    from rl.core.role_spec import RoleSpec
    from rl.fsdp.engine import FSDPTrainEngine

    config = load_config()
    tokenizer = load_tokenizer(config.model)
    spec = RoleSpec("actor", optim=OptimConfig(lr=1e-3), mini_batch_size=2, use_fused_kernels=fused)
    engine = FSDPTrainEngine(load_causal_lm(config.model, tokenizer, seed=0), spec)
    mlps = [layer.mlp for layer in engine.model.model.layers]
    assert mlps and all(isinstance(m.forward, functools.partial) == fused for m in mlps)
