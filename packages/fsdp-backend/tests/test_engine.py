"""The FSDP2 train engine at world size 1 on CPU (gloo), against plain-torch computations."""

import copy
import os
import stat

import pytest
import torch
from transformers import AutoModelForCausalLM

from rl.core.config import OptimConfig, load_config
from rl.core.engines import Rollouts
from rl.core.models import load_causal_lm, load_tokenizer
from rl.core.role_spec import RoleSpec
from rl.core.trainer.rollout_batch import build_batch
from rl.fsdp.engine import FSDPTrainEngine


def full(tensor):
    """The whole tensor: FSDP2's DTensors gathered (plain tensors at one rank in fp32)."""
    return tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(load_config().model)


def make_model(tokenizer, seed=0):
    return load_causal_lm(load_config().model, tokenizer, seed=seed)


def make_batch(tokenizer, rows=6, seed=0):
    generator = torch.Generator().manual_seed(seed)
    prompts = [tokenizer(f"{i}+{2 * i}=").input_ids for i in range(rows)]
    responses = [
        torch.randint(3, len(tokenizer), (1 + i % 4,), generator=generator).tolist()
        for i in range(rows)
    ]
    return build_batch(
        Rollouts(prompts, responses, [[0.0] * len(r) for r in responses]), tokenizer.pad_token_id, 5
    )


def reference_logprobs(model, batch, temperature=1.0):
    """Float64, one row at a time, no padding at all: an independent oracle."""
    out = torch.zeros(batch["responses"].shape, dtype=torch.float64)
    for row in range(batch["input_ids"].shape[0]):
        mask = batch["attention_mask"][row].bool()
        ids = batch["input_ids"][row][mask].unsqueeze(0)
        length = int(batch["response_mask"][row].sum())
        with torch.no_grad():
            logits = model.double()(input_ids=ids).logits[0].double()
        model.float()
        logp = torch.log_softmax(logits / temperature, -1)
        targets = ids[0, -length:]
        out[row, :length] = logp[-length - 1 : -1].gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return out


def test_logprobs_and_entropy_match_an_unpadded_float64_forward(tokenizer):
    model = make_model(tokenizer)
    plain = copy.deepcopy(model)
    engine = FSDPTrainEngine(model, RoleSpec("ref", micro_batch_size=4, temperature=0.8))
    batch = make_batch(tokenizer)
    output = engine.compute_logprobs(batch)
    mask = batch["response_mask"].bool()
    expected = reference_logprobs(plain, batch, temperature=0.8)
    assert torch.allclose(output.logprobs[mask].double(), expected[mask], atol=1e-4)
    assert (output.entropy[mask] >= 0).all() and (
        output.entropy[mask] <= torch.log(torch.tensor(len(tokenizer)))
    ).all()


def nll(output, micro, mini):
    mask = micro["response_mask"]
    return -(output.logprobs * mask).sum() / mini["response_mask"].sum(), {"nll": 1.0}


def train_once(tokenizer, micro_batch_size, step_gradients):
    engine = FSDPTrainEngine(
        make_model(tokenizer),
        RoleSpec(
            "actor",
            optim=OptimConfig(lr=1e-2),
            mini_batch_size=6,
            micro_batch_size=micro_batch_size,
        ),
    )
    with step_gradients(engine) as grads:  # of the (single) mini-batch
        metrics = engine.train_step(make_batch(tokenizer), nll)
    return grads, dict(engine.export_weights()), metrics


def test_micro_batch_size_does_not_change_the_gradient(tokenizer, step_gradients):
    grads_one, weights, metrics = train_once(tokenizer, 6, step_gradients)
    grads_split, _, metrics_split = train_once(tokenizer, 2, step_gradients)
    start = make_model(tokenizer).state_dict()
    assert sum(not torch.equal(weights[n], start[n]) for n in weights) > 10  # it did update
    for name, grad in grads_one.items():
        assert torch.allclose(grad, grads_split[name], rtol=1e-4, atol=1e-7), name
    assert metrics["actor/grad_norm"] == pytest.approx(metrics_split["actor/grad_norm"], rel=1e-5)
    assert metrics["lr"] == pytest.approx(1e-2)


def test_save_load_round_trip_continues_identically(tokenizer, tmp_path):
    batch = make_batch(tokenizer)
    first = FSDPTrainEngine(
        make_model(tokenizer), RoleSpec("actor", optim=OptimConfig(lr=1e-2), mini_batch_size=3)
    )
    first.train_step(batch, nll)
    first.save(str(tmp_path / "actor"))
    second = FSDPTrainEngine(
        make_model(tokenizer, seed=5),
        RoleSpec("actor", optim=OptimConfig(lr=1e-2), mini_batch_size=3),
    )
    second.load(str(tmp_path / "actor"))
    first.train_step(batch, nll)
    second.train_step(batch, nll)
    a, b = dict(first.export_weights()), dict(second.export_weights())
    assert all(torch.equal(a[name], b[name]) for name in a)


def test_hf_export_loads_with_from_pretrained(tokenizer, tmp_path):
    engine = FSDPTrainEngine(make_model(tokenizer), RoleSpec("actor", optim=OptimConfig(lr=1e-3)))
    previous = os.umask(0o027)
    try:
        engine.save_hf(str(tmp_path / "hf"), tokenizer)
    finally:
        os.umask(previous)
    # every file as the umask gives it (safetensors alone writes model.safetensors 0600)
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "hf").iterdir()} == {
        p.name: 0o640 for p in (tmp_path / "hf").iterdir()
    }
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
    exported = dict(engine.export_weights())
    for name, tensor in loaded.state_dict().items():
        assert torch.equal(tensor, exported[name]), name


def test_fused_kernel_path_matches_the_logits_path(tokenizer, step_gradients):
    batch = make_batch(tokenizer)
    plain = FSDPTrainEngine(
        make_model(tokenizer),
        RoleSpec(
            "actor",
            optim=OptimConfig(lr=1e-3),
            mini_batch_size=6,
            temperature=0.9,
            use_fused_kernels=False,
        ),
    )
    fused = FSDPTrainEngine(
        make_model(tokenizer),
        RoleSpec(
            "actor",
            optim=OptimConfig(lr=1e-3),
            mini_batch_size=6,
            temperature=0.9,
            use_fused_kernels=True,
        ),
    )
    a, b = plain.compute_logprobs(batch), fused.compute_logprobs(batch)
    mask = batch["response_mask"].bool()  # the fused path computes real tokens only
    assert torch.allclose(a.logprobs[mask], b.logprobs[mask], atol=1e-5)
    assert torch.allclose(a.entropy[mask], b.entropy[mask], atol=1e-5)
    assert (b.logprobs[~mask] == 0).all()
    with step_gradients(plain) as ours, step_gradients(fused) as theirs:
        plain.train_step(batch, nll)
        fused.train_step(batch, nll)
    assert list(ours) == list(theirs) == [n for n, _ in plain.model.named_parameters()]
    for name, grad in ours.items():
        assert torch.allclose(grad, theirs[name], rtol=1e-4, atol=1e-6), name


def test_a_skipped_update_leaves_weights_and_lr_schedule_alone(tokenizer):
    """A non-finite gradient norm skips the optimizer step; the LR schedule follows real
    updates only, so a run that recovers continues its schedule where it was."""
    batch = make_batch(tokenizer)
    optim = OptimConfig(lr=1e-2, lr_scheduler="linear", min_lr_ratio=0.0)
    engine = FSDPTrainEngine(
        make_model(tokenizer), RoleSpec("actor", optim=optim, total_steps=4, mini_batch_size=6)
    )
    before = {n: t.clone() for n, t in engine.export_weights()}

    def nan_loss(output, micro, mini):
        loss, metrics = nll(output, micro, mini)
        return loss * float("nan"), metrics

    metrics = engine.train_step(batch, nan_loss)
    assert metrics["actor/skipped_steps"] == 1.0
    assert all(torch.equal(t, before[n]) for n, t in engine.export_weights())
    assert engine.lr_scheduler.last_epoch == 0  # not advanced
    expected_norm = torch.linalg.vector_norm(torch.cat([t.flatten() for t in before.values()]))
    assert metrics["actor/weight_norm"] == pytest.approx(float(expected_norm), rel=1e-5)
    metrics = engine.train_step(batch, nll)
    assert metrics["actor/skipped_steps"] == 0.0 and metrics["lr"] == pytest.approx(1e-2)
    assert engine.lr_scheduler.last_epoch == 1


def test_bf16_mixed_precision_stays_close_to_fp32_and_trains(tokenizer):
    from rl.fsdp.config import FSDPConfig, MixedPrecisionConfig

    batch = make_batch(tokenizer)
    mask = batch["response_mask"].bool()
    exact = FSDPTrainEngine(make_model(tokenizer), RoleSpec("ref")).compute_logprobs(batch).logprobs
    policy = FSDPConfig(mixed_precision=MixedPrecisionConfig(param_dtype="bfloat16"))
    engine = FSDPTrainEngine(
        make_model(tokenizer),
        RoleSpec(
            "actor", optim=OptimConfig(lr=1e-3), mini_batch_size=6, backends={"fsdp_config": policy}
        ),
    )
    mixed = engine.compute_logprobs(batch).logprobs
    difference = float((mixed - exact)[mask].abs().max())
    assert 0 < difference < 0.02  # bf16 weights in the forward: ~3 significant digits
    before = {n: p.full_tensor().clone() for n, p in engine.model.named_parameters()}
    metrics = engine.train_step(batch, nll)
    assert metrics["actor/grad_norm"] > 0
    for name, param in engine.model.named_parameters():  # the fp32 master copy moved
        assert param.dtype == torch.float32
        assert not torch.equal(before[name], param.full_tensor()), name


def test_the_cpu_offload_policy_is_refused_on_cpu_with_what_to_do(tokenizer):
    from rl.core.config import ConfigError
    from rl.fsdp.config import FSDPConfig

    with pytest.raises(ConfigError, match="offload_policy = true needs trainer.device=cuda"):
        FSDPTrainEngine(
            make_model(tokenizer),
            RoleSpec("ref", backends={"fsdp_config": FSDPConfig(offload_policy=True)}),
        )


def test_one_rank_in_full_precision_trains_the_plain_model_as_fsdp2_would(tokenizer, monkeypatch):
    """FSDP2 at one rank in fp32 shards, casts and offloads nothing: the engine keeps the
    plain module (and torch's fused AdamW over its plain parameters). Two updates equal
    those of the FSDP2-wrapped model with torch's default AdamW, within fp32 rounding."""
    import rl.fsdp.wrap

    batch = make_batch(tokenizer)

    def two_steps():
        engine = FSDPTrainEngine(
            make_model(tokenizer), RoleSpec("actor", optim=OptimConfig(lr=1e-2), mini_batch_size=3)
        )
        metrics = [engine.train_step(batch, nll) for _ in range(2)]
        return engine, metrics, dict(engine.export_weights())

    plain, plain_metrics, plain_weights = two_steps()
    assert all(type(p) is torch.nn.Parameter for p in plain.model.parameters())
    assert plain.optimizer.defaults["fused"] is True
    monkeypatch.setattr(rl.fsdp.wrap, "needs_fsdp", lambda mesh, fsdp: True)
    wrapped, wrapped_metrics, wrapped_weights = two_steps()
    assert all(hasattr(p, "full_tensor") for p in wrapped.model.parameters())
    assert not wrapped.optimizer.defaults.get("fused")
    for ours, theirs in zip(plain_metrics, wrapped_metrics, strict=True):
        assert ours["actor/loss"] == pytest.approx(theirs["actor/loss"], rel=1e-5)
        assert ours["actor/grad_norm"] == pytest.approx(theirs["actor/grad_norm"], rel=1e-5)
    assert (
        sum(
            not torch.equal(plain_weights[n], make_model(tokenizer).state_dict()[n])
            for n in plain_weights
        )
        > 10
    )
    for name, tensor in plain_weights.items():
        if name.endswith("k_proj.bias"):
            # its gradient is zero in exact arithmetic (softmax ignores a shift shared by
            # all keys), so Adam turns rounding noise into full-size steps either way
            continue
        assert torch.allclose(tensor, wrapped_weights[name], rtol=1e-5, atol=5e-6), name


@pytest.mark.parametrize("use_fused_kernels", [None, True, False])
def test_a_frozen_copy_gives_the_training_logprobs_bit_for_bit(tokenizer, use_fused_kernels):
    """Reference / old log-probs (no grad, eval) and the training forward's (grad, train)
    take one path: equal bits, so a frozen copy's KL is exactly 0 and the ratio exactly 1."""
    batch = make_batch(tokenizer)
    options = dict(mini_batch_size=6, micro_batch_size=3, temperature=0.9)
    ref = FSDPTrainEngine(
        make_model(tokenizer), RoleSpec("ref", use_fused_kernels=use_fused_kernels, **options)
    )
    actor = FSDPTrainEngine(
        make_model(tokenizer),
        RoleSpec(
            "actor", optim=OptimConfig(lr=1e-3), use_fused_kernels=use_fused_kernels, **options
        ),
    )
    frozen = ref.compute_logprobs(batch).logprobs
    # as the controller asks for the reference's and old log-probs: without entropy
    without_entropy = ref.compute_logprobs(batch, calculate_entropy=False)
    before = actor.compute_logprobs(batch, calculate_entropy=False).logprobs
    assert without_entropy.entropy is None
    seen = torch.zeros_like(frozen)

    def capture(output, micro, mini):
        # the micro-batch's rows in order: the first three rows, then the last three
        rows = slice(0, 3) if not seen[:3].any() else slice(3, 6)
        seen[rows] = output.logprobs.detach()
        return nll(output, micro, mini)

    actor.train_step(batch, capture)
    assert torch.equal(without_entropy.logprobs, frozen)
    assert torch.equal(frozen, before)
    assert torch.equal(seen, frozen)


def test_fsdp2_dtensors_step_with_foreach_adamw_as_the_single_tensor_loop_does(
    tokenizer, monkeypatch
):
    """Under FSDP2 (forced here at one rank) AdamW runs torch's foreach implementation over
    the DTensors (torch itself picks it on GPU only); two updates equal the single-tensor
    loop's within fp32 rounding."""
    import rl.fsdp.optimizer
    import rl.fsdp.wrap

    monkeypatch.setattr(rl.fsdp.wrap, "needs_fsdp", lambda mesh, fsdp: True)
    batch = make_batch(tokenizer)

    def two_steps():
        engine = FSDPTrainEngine(
            make_model(tokenizer), RoleSpec("actor", optim=OptimConfig(lr=1e-2), mini_batch_size=3)
        )
        for _ in range(2):
            engine.train_step(batch, nll)
        return engine, dict(engine.export_weights())

    foreach, foreach_weights = two_steps()
    assert all(hasattr(p, "full_tensor") for p in foreach.model.parameters())
    assert foreach.optimizer.defaults["foreach"] is True
    monkeypatch.setattr(
        rl.fsdp.optimizer,
        "adamw_implementation",
        lambda model, trained=None, scaled=False: {"foreach": False},
    )
    single, single_weights = two_steps()
    assert single.optimizer.defaults["foreach"] is False
    start = make_model(tokenizer).state_dict()
    assert sum(not torch.equal(foreach_weights[n], start[n]) for n in foreach_weights) > 10
    for name, tensor in foreach_weights.items():
        if not name.endswith("k_proj.bias"):  # zero gradient in exact arithmetic (above)
            assert torch.allclose(tensor, single_weights[name], rtol=1e-5, atol=5e-6), name


@pytest.mark.parametrize("sharded", [False, True])
def test_forward_only_passes_record_no_graph(tokenizer, monkeypatch, sharded):
    """Plain model: inference mode; FSDP2 (forced at one rank): no_grad. Either way the
    forward runs with grad mode off (no graph built) and the log-probs carry none."""
    import rl.fsdp.wrap

    monkeypatch.setattr(rl.fsdp.wrap, "needs_fsdp", lambda mesh, fsdp: sharded)
    engine = FSDPTrainEngine(make_model(tokenizer), RoleSpec("ref", mini_batch_size=6))
    assert engine.exports_views is not sharded
    modes, forward = [], engine.passes.forward

    def watched(micro, with_entropy, *phase):
        modes.append((torch.is_grad_enabled(), torch.is_inference_mode_enabled()))
        return forward(micro, with_entropy, *phase)

    monkeypatch.setattr(engine.passes, "forward", watched)
    output = engine.compute_logprobs(make_batch(tokenizer))
    assert modes and set(modes) == {(False, not sharded)}
    assert not output.logprobs.requires_grad and not output.entropy.requires_grad


def test_adams_eps_and_betas_come_from_the_config_and_change_the_update(tokenizer):
    """optim.eps / betas / weight_decay reach torch's AdamW; eps large against the gradient
    scale shrinks Adam's first step (lr * m / (sqrt(v) + eps)), so it changes the weights."""
    batch = make_batch(tokenizer)

    def after_one_step(**optim):
        engine = FSDPTrainEngine(
            make_model(tokenizer),
            RoleSpec("actor", optim=OptimConfig(lr=1e-2, **optim), mini_batch_size=6),
        )
        group = engine.optimizer.param_groups[0]
        engine.train_step(batch, nll)
        return (group["eps"], group["betas"], group["weight_decay"]), dict(engine.export_weights())

    (eps, betas, decay), default = after_one_step()
    assert (eps, betas, decay) == (1e-8, (0.9, 0.999), 0.0)
    settings, large = after_one_step(eps=1.0, betas=(0.8, 0.99), weight_decay=0.1)
    assert settings == (1.0, (0.8, 0.99), 0.1)
    assert any(not torch.equal(default[name], large[name]) for name in default)


def test_the_gradients_are_released_when_the_step_ends(tokenizer, step_gradients):
    """No `.grad` outlives `train_step` (as verl's actor and HF's Trainer): colocated, it
    would sit beside the rollout engine while it generates; the step still applied them."""
    engine = FSDPTrainEngine(
        make_model(tokenizer), RoleSpec("actor", optim=OptimConfig(lr=1e-2), mini_batch_size=3)
    )
    with step_gradients(engine) as grads:
        engine.train_step(make_batch(tokenizer), nll)  # two mini-batches: two optimizer steps
    assert len(grads) == len(list(engine.model.parameters()))  # the last step applied them
    assert all(p.grad is None for p in engine.model.parameters())
