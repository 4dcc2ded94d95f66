"""Tied word embeddings (`lm_head.weight` IS `model.embed_tokens.weight`) in the FSDP
engine: at one rank (the plain model, and FSDP2 forced) and at two gloo ranks (one
`fully_shard` per decoder layer, then the root), a step keeps the tie, updates the one
tensor with the gradient of both uses, equals a plain-torch step, and the optimizer,
export, checkpoints and the HF folder hold the tensor once."""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM
from warm_ranks import on_a_free_port

from rl.core.config import OptimConfig
from rl.core.engines import LogprobOutput
from rl.fsdp.forward import response_logprobs

HERE = Path(__file__).parent
_spec = importlib.util.spec_from_file_location("fsdp_tied_ranks", HERE / "_tied_ranks.py")
ranks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ranks)

FAMILIES = list(ranks.FAMILIES)
EMBED, HEAD = "model.embed_tokens.weight", "lm_head.weight"


def plain_step(model, batch):
    """One step by hand: loss over the whole mini-batch (padded rows), clipping as the
    engine does (grad_clip 1.0), torch's AdamW."""
    optim = OptimConfig(lr=ranks.LR)
    params = list(model.parameters())
    optimizer = torch.optim.AdamW(params, lr=optim.lr, betas=optim.betas, weight_decay=0.0)
    logprobs, _ = response_logprobs(model, batch, 1.0, False, packed=False)
    loss, _ = ranks.nll(LogprobOutput(logprobs, None), batch, batch)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, optim.grad_clip)
    gradients = {name: p.grad.clone() for name, p in model.named_parameters()}
    optimizer.step()
    return {name: t.detach() for name, t in model.state_dict().items()}, gradients


def close(ours, theirs, names, gradients=None):
    """Equal to fp32 rounding, as Adam's first step sees it: each element moves by
    lr * g / (|g| + eps), so one whose gradient is itself at rounding level moves by a
    rounding-dependent part of lr. Allowed: at most 1 in 1,000 elements off by more than
    1e-6, none by more than 5 % of lr (a missing or doubled gradient term flips whole
    rows by 2 lr) among those whose reference gradient (`gradients`, where known) is
    above a millionth of its tensor's largest: below that, the summation order alone
    decides the step (a layer-1 gate_proj element moved 6e-5 apart at a gradient of
    1e-9 when the suite ran in another order). Qwen2's k_proj.bias, whose gradient is
    zero in exact arithmetic (softmax ignores a shift shared by all keys), is left out."""
    for name in names:
        if name.endswith("k_proj.bias"):
            continue
        diff = (ours[name] - theirs[name]).abs()
        assert (diff > 1e-6).float().mean() <= 1e-3, (name, int((diff > 1e-6).sum()))
        gradient = (gradients or {}).get(name)
        if gradient is not None:
            diff = diff[gradient.abs() > 1e-6 * gradient.abs().max()]
        assert diff.max() <= 0.05 * ranks.LR, (name, float(diff.max()))


def test_the_gradient_of_the_tied_tensor_is_the_sum_of_its_two_uses():
    tied = ranks.tied_model("qwen2")
    untied = AutoModelForCausalLM.from_config(
        type(tied.config)(**{**tied.config.to_dict(), "tie_word_embeddings": False})
    )
    untied.load_state_dict(tied.state_dict())  # the head starts as a copy of the embedding
    assert untied.lm_head.weight is not untied.model.embed_tokens.weight
    batch = ranks.make_batch()
    for model in (tied, untied):
        logprobs, _ = response_logprobs(model, batch, 1.0, False, packed=False)
        ranks.nll(LogprobOutput(logprobs, None), batch, batch)[0].backward()
    both = untied.model.embed_tokens.weight.grad + untied.lm_head.weight.grad
    assert untied.lm_head.weight.grad.abs().max() > 1e-3  # both uses contribute
    assert torch.allclose(tied.model.embed_tokens.weight.grad, both, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_step_at_one_rank_keeps_the_tie_and_equals_a_plain_torch_step(family):
    engine = ranks.make_engine(family, 0, {})
    model = engine.model
    embedding = model.model.embed_tokens.weight
    trained = engine.training.parameters()
    assert sum(p is embedding for p in trained) == 1
    assert len(trained) == len(list(model.parameters())) == len(model.state_dict()) - 1
    reference = ranks.tied_model(family)  # the same seed: the same weights
    assert reference.lm_head.weight is reference.model.embed_tokens.weight
    batch = ranks.make_batch()
    engine.train_step(batch, ranks.nll)
    assert model.lm_head.weight is model.model.embed_tokens.weight is embedding
    exported = dict(engine.export_weights())
    assert HEAD not in exported and EMBED in exported
    expected, gradients = plain_step(reference, batch)
    assert not torch.equal(expected[EMBED], ranks.tied_model(family).model.embed_tokens.weight)
    close(exported, expected, exported, gradients)
    assert torch.equal(expected[HEAD], expected[EMBED])


def test_fsdp2_at_one_rank_keeps_the_tie_as_the_plain_model_does(monkeypatch):
    import rl.fsdp.wrap

    batch = ranks.make_batch()
    plain = ranks.make_engine("qwen3", 0, {})
    plain.train_step(batch, ranks.nll)
    monkeypatch.setattr(rl.fsdp.wrap, "needs_fsdp", lambda mesh, fsdp: True)
    wrapped = ranks.make_engine("qwen3", 0, {})
    model = wrapped.model
    assert hasattr(model.lm_head.weight, "full_tensor")  # a DTensor: FSDP2 ran
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert len(wrapped.training.parameters()) == len(plain.training.parameters())
    wrapped.train_step(batch, ranks.nll)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    ours, theirs = dict(wrapped.export_weights()), dict(plain.export_weights())
    assert set(ours) == set(theirs) and HEAD not in ours
    close(ours, theirs, ours)


# what a rank imports beyond _tied_ranks.py's top, loaded once in the warm-ranks server
PRELOAD = (
    "transformers.models.auto.modeling_auto",
    "transformers.models.qwen2.modeling_qwen2",
    "transformers.models.qwen3.modeling_qwen3",
    "transformers.models.llama.modeling_llama",
    "rl.fsdp.engine",
)


def run_ranks(warm_ranks, tmp_path: Path, world: int, **options) -> list[dict]:
    out = tmp_path / f"ranks-{world}"
    out.mkdir()
    on_a_free_port(
        lambda port: warm_ranks(
            HERE / "_tied_ranks.py",
            [[rank, world, port, out, json.dumps(options)] for rank in range(world)],
            preload=PRELOAD,
        )
    )
    return [torch.load(out / f"{rank}.pt", weights_only=False) for rank in range(world)]


def test_one_rank_resumes_bit_identically_and_writes_the_tensor_once(tmp_path, warm_ranks):
    """The plain model's checkpoint (DCP, each tied parameter once) and HF folder."""
    (result,) = run_ranks(warm_ranks, tmp_path, 1, family="llama")
    assert result["tied_at_start"] and result["tied_after_step"] and result["tied_after_resume"]
    assert HEAD not in result["stepped"]
    for name, tensor in result["stepped"].items():
        assert torch.equal(result["loaded"][name], tensor), name
    (straight, straight_weights), (resumed, resumed_weights) = (
        result["straight"],
        result["resumed"],
    )
    assert straight == resumed
    for name, tensor in straight_weights.items():
        assert torch.equal(resumed_weights[name], tensor), name
    folder = tmp_path / "ranks-1"
    assert not any("lm_head" in key for key in _dcp_keys(folder / "checkpoint" / "dcp"))
    assert HEAD not in load_file(folder / "hf" / "model.safetensors")
    loaded = AutoModelForCausalLM.from_pretrained(folder / "hf")
    assert loaded.lm_head.weight is loaded.model.embed_tokens.weight
    assert torch.equal(loaded.lm_head.weight, resumed_weights[EMBED])


def _dcp_keys(folder: Path) -> list[str]:
    """The tensor names a DCP checkpoint holds (model and optimizer state)."""
    from rl.core.sharded_io import SafeReader

    return list(SafeReader(str(folder)).read_metadata().state_dict_metadata)


@pytest.mark.slow
@pytest.mark.parametrize(
    "family, options",
    [
        ("qwen2", {}),
        ("qwen3", {"meta_init": True, "fused": True}),
        ("llama", {}),
        ("qwen2", {"fused": True, "tie": False}),
    ],
    ids=["qwen2", "qwen3-meta_init-fused", "llama-rope_scaling", "qwen2-untied-fused"],
)
def test_two_gloo_ranks_keep_the_tie_through_steps_checkpoints_and_hf_export(
    tmp_path, warm_ranks, family, options
):
    """Also the fused log-prob path, which reads the output layer's weight itself: each
    rank's gradient of it comes from its own rows and must be averaged over the ranks as
    FSDP2 averages the others (it was each rank's own, for tied and untied heads alike)."""
    tie = options.get("tie", True)
    first, second = run_ranks(warm_ranks, tmp_path, 2, family=family, **options)
    one = ranks.make_engine(family, 0, {"fused": options.get("fused"), "tie": tie})
    assert first["model_params"] == first["optimizer_params"] == len(one.training.parameters())
    batch = ranks.make_batch()
    one.train_step(batch, ranks.nll)
    expected = dict(one.export_weights())
    assert (HEAD in expected) is not tie  # an untied model still exports its head
    for result in (first, second):  # every rank exports the same full tensors
        assert result["tied_at_start"] is result["tied_after_step"] is tie
        assert result["tied_after_resume"] is tie
        assert set(result["stepped"]) == set(expected)
        close(result["stepped"], expected, expected)
        assert torch.equal(
            result["start"][EMBED], ranks.tied_model(family).model.embed_tokens.weight
        )
        for name, tensor in result["stepped"].items():
            assert torch.equal(tensor, first["stepped"][name]), name
            assert torch.equal(result["loaded"][name], tensor), name  # bit-identical resume
        straight, resumed = result["straight"], result["resumed"]
        assert straight[0] == resumed[0]
        for name, tensor in straight[1].items():
            assert torch.equal(resumed[1][name], tensor), name
    folder = tmp_path / "ranks-2" / "hf"
    assert (HEAD in load_file(folder / "model.safetensors")) is not tie  # once if tied
    assert json.loads((folder / "config.json").read_text())["tie_word_embeddings"] is tie
    loaded = AutoModelForCausalLM.from_pretrained(folder)
    assert (loaded.lm_head.weight is loaded.model.embed_tokens.weight) is tie
    for name, tensor in loaded.state_dict().items():
        assert torch.equal(tensor, first["resumed"][1][name if name in expected else EMBED])


def test_at_a_real_vocabulary_the_lookup_adds_its_rows_in_place_and_the_step_is_the_same(
    monkeypatch, step_gradients
):
    """From 16,384 tokens the tied lookup adds its gradient rows into the shared weight's
    `.grad` in place (`rl.fsdp.tied_lookup`): no [V, H] tensor is added to another out of
    place in backward, the gradient stays dense and the step equals a plain-torch one."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class WholeTensorSums(TorchDispatchMode):
        """Out-of-place additions of two [V, H] tensors (autograd's input buffer), and the
        zeroed [V, H] tensors made."""

        def __init__(self):
            super().__init__()
            self.seen = self.zeroed = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            shapes = [tuple(a.shape) for a in args if isinstance(a, torch.Tensor)]
            if func is torch.ops.aten.add.Tensor and shapes.count((20000, 64)) == 2:
                self.seen += 1
            if func is torch.ops.aten.zeros_like.default and shapes == [(20000, 64)]:
                self.zeroed += 1
            return func(*args, **(kwargs or {}))

    monkeypatch.setitem(ranks.SHAPE, "vocab_size", 20000)
    engine = ranks.make_engine("qwen2", 0, {})
    model = engine.model
    embedding = model.model.embed_tokens
    assert isinstance(embedding.forward, functools.partial) and engine.passes.fused()
    batch = ranks.make_batch()
    with WholeTensorSums() as sums, step_gradients(engine) as gradients:
        engine.train_step(batch, ranks.nll)
    assert sums.seen == 0
    # AdamW's two moments alone: the lookup's rows wait for the head's gradient to be in
    # `.grad` instead of starting a zeroed [V, H] gradient beside it
    assert sums.zeroed == 2
    grad = gradients["model.embed_tokens.weight"]
    assert not grad.is_sparse and grad.shape == (20000, 64)
    assert embedding.weight.grad is None  # released when the step ended
    reference = ranks.tied_model("qwen2")
    assert not isinstance(reference.model.embed_tokens.forward, functools.partial)
    exported = dict(engine.export_weights())
    expected, gradients = plain_step(reference, batch)
    close(exported, expected, exported, gradients)
    monkeypatch.setitem(ranks.SHAPE, "vocab_size", 96)
    small = ranks.make_engine("qwen2", 0, {}).model.model.embed_tokens
    assert not isinstance(small.forward, functools.partial)
