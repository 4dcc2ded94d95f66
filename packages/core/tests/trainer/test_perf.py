"""`perf/tflops/actor` and `perf/mfu/actor` (rl.core.trainer.perf): the update's model
FLOPs counted by hand on a small model, shared prompts counted once, the MFU against the
configured peak and none on CPU without one."""

import pytest

from rl.core.config import load_config
from rl.core.engines import Rollouts
from rl.core.plan.model_dims import ModelDims
from rl.core.trainer.perf import actor_perf_metrics, update_flops
from rl.core.trainer.rollout_batch import build_batch

DIMS = ModelDims(
    vocab_size=10,
    hidden_size=4,
    intermediate_size=8,
    num_layers=1,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=2,
    tied_embeddings=True,
)
# per token: projections 2*4*(2*4 + 2*2) = 96, MLP 2*3*4*8 = 192; attention 4*4 = 16 a key;
# the head 2*4*10 = 80 a position
LAYER, KEY, HEAD = 96 + 192, 16, 80


def batch():
    """Two rows answering the prompt [1, 2, 3] (responses of 2 and 1 tokens), one row
    answering [4, 5] (3 tokens)."""
    rollouts = Rollouts(
        [[1, 2, 3], [1, 2, 3], [4, 5]], [[6, 7], [8], [9, 9, 9]], [[0.0] * 2, [0.0], [0.0] * 3]
    )
    return build_batch(rollouts, 0, 3)


def row(prompt, response):
    """One unshared row: prompt + response tokens, causal keys 1..L, the head on R."""
    tokens = prompt + response
    return LAYER * tokens + KEY * tokens * (tokens + 1) / 2 + HEAD * response


def test_unshared_rows_by_hand():
    forward = row(3, 2) + row(3, 1) + row(2, 3)
    assert update_flops(DIMS, batch(), False, False, 1) == 3 * forward
    assert update_flops(DIMS, batch(), False, True, 2) == 2 * 4 * forward  # recompute, 2 epochs


def test_a_shared_prompt_is_counted_once():
    def prompt(p):
        return LAYER * p + KEY * p * (p + 1) / 2

    def response(p, r):  # r tokens at positions p+1..p+r, each seeing what precedes it
        return LAYER * r + KEY * (r * p + r * (r + 1) / 2) + HEAD * r

    forward = prompt(3) + response(3, 2) + response(3, 1) + prompt(2) + response(2, 3)
    assert update_flops(DIMS, batch(), True, False, 1) == 3 * forward
    assert update_flops(DIMS, batch(), True, False, 1) < update_flops(
        DIMS, batch(), False, False, 1
    )


def test_mfu_against_the_configured_peak_and_none_on_cpu_without_one():
    config = load_config()  # the built-in tiny model on CPU
    plain = actor_perf_metrics(config, batch(), 0.5, True)
    assert set(plain) == {"perf/tflops/actor"} and plain["perf/tflops/actor"] > 0
    peaked = actor_perf_metrics(
        load_config(overrides=["trainer.device_peak_tflops=0.001"]), batch(), 0.5, True
    )
    assert peaked["perf/mfu/actor"] == pytest.approx(peaked["perf/tflops/actor"] / 0.001)
    assert peaked["perf/tflops/actor"] == plain["perf/tflops/actor"]
    unshared = actor_perf_metrics(config, batch(), 0.5, False)  # the engine packed every row
    assert unshared["perf/tflops/actor"] > plain["perf/tflops/actor"]
    assert actor_perf_metrics(config, batch(), 0.25, True)["perf/tflops/actor"] == pytest.approx(
        2 * plain["perf/tflops/actor"]
    )
    with pytest.raises(Exception, match="device_peak_tflops"):
        load_config(overrides=["trainer.device_peak_tflops=0"])
