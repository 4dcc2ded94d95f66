"""`rl train` with the megatron engine: the demo learns on CPU at TP = 1, a PPO critic runs
on it, and bad layouts are refused before anything starts.

Every run here is the user's journey on a CPU: `rl train actor.strategy=megatron` and
nothing else, no PYTHONPATH trick; the engine installs rl-megatron's CPU debug mode
(`rl.megatron.cpu_mode`) itself because `trainer.device` is cpu.
"""

from __future__ import annotations

import os
import subprocess

import pytest

pytest.importorskip("megatron.core", reason="megatron-core is not installed")
pytestmark = pytest.mark.megatron

CPU_MODE_WARNING = "megatron on CPU: a debug mode, slow"


def rl_train(rl_executable, output_dir, *overrides, timeout=120, env=None):
    """`rl train` with `actor.strategy=megatron`, in this process's environment."""
    target = f"trainer.output_dir={output_dir}"
    return subprocess.run(
        [rl_executable, "train", "actor.strategy=megatron", *overrides, target],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


@pytest.mark.ray
@pytest.mark.slow
def test_two_ray_workers_each_build_their_megatron_engine_in_the_cpu_mode(
    tmp_path, rl_executable, metrics_rows
):
    """`trainer.launcher=ray` on 2 CPU workers (DP 2): each worker process installs the mode
    when it builds its engines, the driver when it builds the SFT engine; nothing on
    PYTHONPATH (measured: 47 s-2 min on 2 shared cores)."""
    pytest.importorskip("ray")
    result = rl_train(
        rl_executable,
        tmp_path,
        "trainer.launcher=ray",
        "cluster.n_gpus_per_node=2",
        "trainer.total_training_steps=2",
        "trainer.test_freq=-1",
        "trainer.progress_bar=false",
        timeout=900,
        env={**os.environ, "RAY_AUTH_MODE": "disabled"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    output = (result.stdout + result.stderr).splitlines()  # Ray forwards the workers' logs
    announced = [line for line in output if CPU_MODE_WARNING in line]
    assert len(announced) == 2, announced  # the driver, and rank 0 of the workers
    assert any("RoleWorker" in line for line in announced), announced
    assert [r["step"] for r in metrics_rows(tmp_path) if "actor/grad_norm" in r] == [1, 2]


@pytest.mark.slow
def test_the_demo_learns_on_the_megatron_engine(tmp_path, rl_executable, metrics_rows):
    """`pip install rl-core rl-megatron` then `rl train actor.strategy=megatron`: the
    embedded default (actor and reference on megatron-core, TP = PP = 1, the HF rollout
    engine fed by the megatron export) on this CPU, with no shims anywhere on PYTHONPATH;
    the engine announces the CPU debug mode once (the SFT warm-up, actor and reference are
    built in one process). Cut to 100 steps for CI time. Same margins as the FSDP demo
    test: a gain of 0.15 and no fall-back of more than 0.10 (seed 1 on an AMD EPYC, 100
    steps: 0.30 -> 0.73 in 1.8 min; the full 200: 0.30 -> 0.87, the FSDP engine 0.30 ->
    0.82). (A 2-step run of the same command was a test of its own.)"""
    shims = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if "cpu_site" in p]
    assert not shims, f"this test is the run without shims, and PYTHONPATH has {shims}"
    result = rl_train(
        rl_executable,
        tmp_path,
        "trainer.progress_bar=false",
        "trainer.total_training_steps=100",
        timeout=1200,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count(CPU_MODE_WARNING) == 1, result.stderr[-3000:]
    trained = [r["step"] for r in metrics_rows(tmp_path) if "actor/grad_norm" in r]
    assert trained == list(range(1, 101))
    accuracy = [r["val/accuracy"] for r in metrics_rows(tmp_path) if "val/accuracy" in r]
    assert len(accuracy) >= 5
    assert accuracy[-1] - accuracy[0] >= 0.15, accuracy
    assert accuracy[-1] >= max(accuracy) - 0.10, accuracy


def test_rl_train_refuses_a_bad_layout_before_starting_anything(tmp_path, rl_executable):
    """The built-in model has 2 attention heads and 1 KV head: TP 2 cannot split them.
    Refused in preflight: the run's folder is never even created (rl_train's timeout is
    the liveness bound)."""
    run = tmp_path / "run"
    result = rl_train(rl_executable, run, "actor.megatron.tensor_model_parallel_size=2")
    assert result.returncode == 2, result.stderr[-2000:]
    assert "actor.megatron.tensor_model_parallel_size = 2 does not divide" in result.stderr
    assert "Traceback" not in result.stderr
    assert not run.exists()


def test_a_ppo_run_with_the_critic_on_megatron_starts_where_the_fsdp_critic_does(
    tmp_path, rl_executable, metrics_rows
):
    """GAE with `critic.strategy=megatron` runs end to end (one step); its values and
    critic update equal those of the same run with the FSDP critic (the same starting
    weights: the built-in value model; the same rollouts: the actor is megatron in both)."""
    first = {}
    for strategy in ("megatron", "fsdp"):
        result = rl_train(
            rl_executable,
            tmp_path / strategy,
            "algorithm.adv_estimator=gae",
            f"critic.strategy={strategy}",
            "trainer.total_training_steps=1",  # the first step is what is compared
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
