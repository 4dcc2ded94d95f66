"""Reduced precision on the FSDP engine as RLinf configures it: `fsdp_config.grad_scaler`
(torch's ShardedGradScaler: scaled loss, unscaled gradients before clipping, a skipped step
on overflow, the scale in the checkpoint) and `fsdp_config.amp_autocast` (the forwards under
torch.autocast). World size 1 on CPU (gloo), against the engine without them."""

import pytest
import torch

from rl.core.config import ConfigError, OptimConfig, load_config
from rl.core.engines import Rollouts
from rl.core.models import load_causal_lm, load_tokenizer
from rl.core.role_spec import RoleSpec
from rl.core.trainer.rollout_batch import build_batch
from rl.fsdp.config import AutocastConfig, FSDPConfig, GradScalerConfig, MixedPrecisionConfig
from rl.fsdp.engine import FSDPTrainEngine


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(load_config().model)


def batch_of(tokenizer, rows=6):
    generator = torch.Generator().manual_seed(0)
    prompts = [tokenizer(f"{i}+{2 * i}=").input_ids for i in range(rows)]
    responses = [
        torch.randint(3, len(tokenizer), (1 + i % 4,), generator=generator).tolist()
        for i in range(rows)
    ]
    return build_batch(
        Rollouts(prompts, responses, [[0.0] * len(r) for r in responses]), tokenizer.pad_token_id, 5
    )


def nll(output, micro, mini):
    mask = micro["response_mask"]
    return -(output.logprobs * mask).sum() / mini["response_mask"].sum(), {}


def engine(tokenizer, use_fused_kernels=False, **fsdp):
    return FSDPTrainEngine(
        load_causal_lm(load_config().model, tokenizer, seed=0),
        RoleSpec(
            "actor",
            optim=OptimConfig(lr=1e-2),
            mini_batch_size=6,
            use_fused_kernels=use_fused_kernels,
            backends={"fsdp_config": FSDPConfig(**fsdp)},
        ),
    )


def weights(engine):
    return {name: tensor.clone() for name, tensor in engine.export_weights()}


def test_a_power_of_two_scale_leaves_the_fp32_gradients_exact(tokenizer):
    """Scaling by 2^16 and back is exact in fp32: the same gradients (their norm bit for
    bit) and the same update (AdamW's foreach loop beside the plain engine's fused kernel,
    equal within fp32 rounding)."""
    batch = batch_of(tokenizer)
    plain, scaled = engine(tokenizer), engine(tokenizer, grad_scaler=GradScalerConfig(True))
    first, second = plain.train_step(batch, nll), scaled.train_step(batch, nll)
    a, b = weights(plain), weights(scaled)
    assert max(float((a[name] - b[name]).abs().max()) for name in a) < 1e-6
    assert first["actor/grad_norm"] == second["actor/grad_norm"]
    assert second["actor/grad_scale"] == 65536.0 and "actor/grad_scale" not in first


def test_an_overflow_skips_the_step_backs_off_and_the_scale_is_checkpointed(tokenizer, tmp_path):
    batch = batch_of(tokenizer)
    huge = GradScalerConfig(True, init_scale=2.0**127, growth_interval=1)
    first = engine(tokenizer, grad_scaler=huge)
    before = weights(first)
    metrics = first.train_step(batch, nll)
    assert metrics["actor/skipped_steps"] == 1.0  # the scaled gradients overflowed
    assert metrics["actor/grad_scale"] == 2.0**126
    after = weights(first)
    assert all(torch.equal(before[name], after[name]) for name in before)
    first.save(str(tmp_path / "ckpt"))
    second = engine(tokenizer, grad_scaler=huge)
    second.load(str(tmp_path / "ckpt"))
    assert second.grad_scaler.get_scale() == 2.0**126
    # both go on identically: each overflow halves the scale, until the gradients fit
    scale, skipped = 2.0**126, 1.0
    while skipped:
        a, b = first.train_step(batch, nll), second.train_step(batch, nll)
        assert repr(a) == repr(b)  # (a NaN norm equals itself here)
        skipped = a["actor/skipped_steps"]
        scale = scale / 2 if skipped else scale * 2  # growth_interval 1: a clean step grows
        assert a["actor/grad_scale"] == scale
        assert scale > 2.0**100, "the scaled gradients never fit"
    a, b = weights(first), weights(second)
    assert all(torch.equal(a[name], b[name]) for name in a)


def test_autocast_runs_the_forward_in_its_precision_and_trains(tokenizer):
    batch = batch_of(tokenizer)
    full = engine(tokenizer)
    half = engine(
        tokenizer,
        amp_autocast=AutocastConfig(True, "float16"),
        grad_scaler=GradScalerConfig(True),
    )
    exact, rounded = full.compute_logprobs(batch), half.compute_logprobs(batch)
    mask = batch["response_mask"].bool()
    difference = (exact.logprobs - rounded.logprobs)[mask].abs().max()
    assert 0 < difference < 5e-2  # fp16 matmuls: close, not equal
    metrics = half.train_step(batch, nll)
    assert metrics["actor/skipped_steps"] == 0.0 and metrics["actor/grad_norm"] > 0
    assert all(p.dtype == torch.float32 for p in half.model.parameters())  # fp32 masters


def test_autocast_beside_fsdp_mixed_precision_is_refused_by_name():
    with pytest.raises(ConfigError, match="amp_autocast.enabled = True is not allowed"):
        FSDPConfig(
            mixed_precision=MixedPrecisionConfig("float16", "float16"),
            amp_autocast=AutocastConfig(True, "float16"),
        )


def test_autocast_around_the_fused_log_probs_keeps_their_tiles_float32(tokenizer):
    """The fused log-prob kernels run inside the autocast forward: their logits tiles stay
    float32 (16-bit tiles read as float32 gave log-probs from misread bits, and crashed
    RLinf's fp16 example at a real vocabulary)."""
    batch = batch_of(tokenizer)
    exact = engine(tokenizer, use_fused_kernels=True).compute_logprobs(batch)
    half = engine(tokenizer, use_fused_kernels=True, amp_autocast=AutocastConfig(True, "float16"))
    assert half.passes.fused()
    rounded = half.compute_logprobs(batch)
    mask = batch["response_mask"].bool()
    assert (exact.logprobs - rounded.logprobs)[mask].abs().max() < 5e-2
    assert half.train_step(batch, nll)["actor/grad_norm"] > 0
