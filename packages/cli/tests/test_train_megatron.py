"""`rl train` with the megatron engine: the demo learns on CPU at TP = 1, a PPO critic runs
on it, and bad layouts are refused before anything starts.

megatron-core needs CUDA-shaped calls answered on CPU: the run gets the test-only shims
through `sitecustomize` on PYTHONPATH (packages/megatron-backend/tests/cpu_site); the
package itself has none.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

pytest.importorskip("megatron.core", reason="megatron-core is not installed")
pytestmark = pytest.mark.megatron

ROOT = Path(__file__).resolve().parents[3]
CPU_SITE = ROOT / "packages" / "megatron-backend" / "tests" / "cpu_site"


def rl_train(rl_executable, output_dir, *overrides, timeout=120, cpu_shims=True):
    """`rl train` with `actor.strategy=megatron`, megatron-core's CPU shims on PYTHONPATH
    unless `cpu_shims` is false."""
    env = {**os.environ, "PYTHONPATH": str(CPU_SITE)} if cpu_shims else None
    target = f"trainer.output_dir={output_dir}"
    return subprocess.run(
        [rl_executable, "train", "actor.strategy=megatron", *overrides, target],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


@pytest.mark.slow
def test_the_demo_learns_on_the_megatron_engine(tmp_path, rl_executable, metrics_rows):
    """The embedded default with `actor.strategy=megatron` (actor and reference on
    megatron-core, TP = PP = 1, the HF rollout engine fed by the megatron export), cut to
    100 steps for CI time. Same margins as the FSDP demo test: a gain of 0.15 and no
    fall-back of more than 0.10 (seed 1 on an AMD EPYC, 100 steps: 0.30 -> 0.73 in 1.8 min;
    the full 200: 0.30 -> 0.87, the FSDP engine 0.30 -> 0.82)."""
    result = rl_train(
        rl_executable,
        tmp_path,
        "trainer.progress_bar=false",
        "trainer.total_training_steps=100",
        timeout=1200,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    accuracy = [r["val/accuracy"] for r in metrics_rows(tmp_path) if "val/accuracy" in r]
    assert len(accuracy) >= 5
    assert accuracy[-1] - accuracy[0] >= 0.15, accuracy
    assert accuracy[-1] >= max(accuracy) - 0.10, accuracy


def test_rl_train_refuses_a_bad_layout_before_starting_anything(tmp_path, rl_executable):
    """The built-in model has 2 attention heads and 1 KV head: TP 2 cannot split them."""
    start = time.monotonic()
    result = rl_train(
        rl_executable, tmp_path, "actor.megatron.tensor_model_parallel_size=2", cpu_shims=False
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert "actor.megatron.tensor_model_parallel_size = 2 does not divide" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "metrics.jsonl").exists()
    assert time.monotonic() - start < 60


def test_a_ppo_run_with_the_critic_on_megatron_starts_where_the_fsdp_critic_does(
    tmp_path, rl_executable, metrics_rows
):
    """GAE with `critic.strategy=megatron` runs end to end; its first step's values and
    critic update equal those of the same run with the FSDP critic (the same starting
    weights: the built-in value model; the same rollouts: the actor is megatron in both)."""
    first = {}
    for strategy in ("megatron", "fsdp"):
        result = rl_train(
            rl_executable,
            tmp_path / strategy,
            "algorithm.adv_estimator=gae",
            f"critic.strategy={strategy}",
            "trainer.total_training_steps=2",
            "trainer.test_freq=-1",
            "trainer.progress_bar=false",
            timeout=600,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        first[strategy] = next(r for r in metrics_rows(tmp_path / strategy) if "values/mean" in r)
    for key in ("values/mean", "critic/vf_loss", "critic/grad_norm"):
        assert first["megatron"][key] == pytest.approx(first["fsdp"][key], rel=1e-4), key


def test_an_on_policy_megatron_step_has_ratio_one_and_zero_kl_to_its_reference(
    tmp_path, rl_executable, metrics_rows
):
    """The old log-probs from the update's forward, and one log-prob path (megatron's
    vocab-parallel fused kernel) for the reference and the update: exactly 1 and 0."""
    result = rl_train(
        rl_executable,
        tmp_path,
        "actor.ppo_mini_batch_size=32",  # = data.train_batch_size: on-policy
        "actor.use_kl_loss=true",
        "sft.steps=5",
        "trainer.total_training_steps=1",
        "trainer.test_freq=-1",
        "trainer.val_before_train=false",
        "data.builtin_val_size=8",
        "trainer.progress_bar=false",
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (step,) = [r for r in metrics_rows(tmp_path) if "actor/kl_loss" in r]
    assert step["actor/old_logprobs_from_update"] == 1.0 and "timing/old_logprob" not in step
    assert step["actor/ratio_max"] == step["actor/ratio_min"] == 1.0
    assert step["actor/kl_loss"] == 0.0
