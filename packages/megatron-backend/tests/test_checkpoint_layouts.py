"""A megatron checkpoint resumes at another layout: saved at TP 2 it loads at TP 1, at
TP 1 at TP 2, at PP 2 at TP 2, at DP 2 at TP 2 (`rl.megatron.checkpoint`: the model and
the distributed optimizer's state are written per parameter, in model space). After
loading, every full weight, its fp32 copy, Adam's exp_avg and exp_avg_sq and Adam's step
are the saved ones bit for bit, as are the LR schedule and the sampling generator; the
step after equals the step the saving run took next to fp32 rounding (other layouts sum
in another order). A MoE model (a chain of two optimizers: dense and expert parameters)
resumes at its layout, and a checkpoint an earlier rl wrote (the optimizer state as the
distributed optimizer's buffers, `dp_reshardable`) still loads at its own layout.

Each scenario runs in `_ranks.py` (`save_for_layouts`, `load_at_layout`), each rank in its
own process; the state is read by `_training_state.py`."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.megatron

TP2 = {"tensor_model_parallel_size": 2}
PP2 = {"pipeline_model_parallel_size": 2}
MOE_EP2 = {"model_type": "qwen3_moe", "expert_model_parallel_size": 2}
CASES = {  # (world, layout) saving, (world, layout) loading
    "TP=2 -> TP=1": ((2, TP2), (1, {})),
    "TP=1 -> TP=2": ((1, {}), (2, TP2)),
    "PP=2 -> TP=2": ((2, PP2), (2, TP2)),
    "DP=2 -> TP=2": ((2, {}), (2, TP2)),
    "MoE, EP=2 -> EP=2": ((2, MOE_EP2), (2, MOE_EP2)),
    "earlier format, TP=2 -> TP=2": ((2, {**TP2, "optimizer_format": "dp_reshardable"}), (2, TP2)),
}
LR = 1e-2  # _ranks.ACTOR_OPTIM


def assert_identical(loaded: dict, saved: dict) -> None:
    """The same training state, tensor for tensor (torch.equal: bits, shape and dtype)."""
    for key in ("weights", "param", "exp_avg", "exp_avg_sq"):
        assert loaded[key].keys() == saved[key].keys(), key
        for name, tensor in saved[key].items():
            assert torch.equal(loaded[key][name], tensor), (key, name)
    assert loaded["steps"] == saved["steps"] == {2.0}
    assert loaded["lr_scheduler"] == saved["lr_scheduler"]
    assert loaded["lrs"] == saved["lrs"]
    assert torch.equal(loaded["generator"], saved["generator"])


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_a_checkpoint_resumes_bit_identically_at_another_layout(run_ranks, tmp_path, case):
    (save_world, save_layout), (load_world, load_layout) = CASES[case]
    checkpoint = str(tmp_path / "checkpoint")
    saving = run_ranks("save_for_layouts", save_world, checkpoint=checkpoint, **save_layout)
    loading = run_ranks("load_at_layout", load_world, checkpoint=checkpoint, **load_layout)
    saved = saving[0]["state"]
    assert any(t.abs().sum() > 0 for t in saved["exp_avg"].values())  # Adam state exists
    for result in saving[1:] + loading:  # every rank gathered the same state
        assert_identical(result["state"], saved)
    straight_metrics, straight = saving[0]["next"]
    for resumed_metrics, resumed in (result["next"] for result in loading):
        assert resumed_metrics["lr"] == straight_metrics["lr"]
        assert resumed_metrics["actor/grad_norm"] == pytest.approx(
            straight_metrics["actor/grad_norm"], rel=1e-5
        )
        assert resumed.keys() == straight.keys()
        for name, tensor in straight.items():
            diff = float((resumed[name] - tensor).abs().max())
            assert diff <= 1e-3 * LR, (name, diff)


def test_the_parallel_sizes_may_change_on_resume():
    """Layout keys: a resumed run may set another TP or PP size (or sequence parallelism,
    or world), not another optimizer."""
    from rl.core.config import load_config
    from rl.core.trainer.resume_config import changes_training

    config = load_config(None, ["actor.strategy=megatron"])
    for key in (
        "actor.megatron.tensor_model_parallel_size",
        "actor.megatron.pipeline_model_parallel_size",
        "actor.megatron.sequence_parallel",
        "cluster.n_gpus_per_node",
    ):
        assert not changes_training(key, config), key
    assert changes_training("actor.megatron.use_distributed_optimizer", config)
