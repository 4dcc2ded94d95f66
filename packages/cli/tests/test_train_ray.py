"""`rl train trainer.launcher=ray`: a worker killed mid-run, SIGTERM to the driver, and
placements the launcher cannot run. (That 2 Ray ranks, their roles colocated and offloading
between phases, train what one process trains is test_train_placements.py's.)"""

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from rl.cli.main import app

pytest.importorskip("ray")

RAY_TWO_RANKS = ["trainer.launcher=ray", "cluster.n_gpus_per_node=2"]
ENV = {**os.environ, "RAY_AUTH_MODE": "disabled"}


@pytest.mark.ray
@pytest.mark.slow
def test_a_worker_killed_mid_run_ends_it_with_one_clear_error(
    tmp_path, tiny_run, kill_worker_mid_run
):
    def second_worker(processes):
        workers = [pid for pid, args in processes if args.startswith("ray::RoleWorker")]
        assert len(workers) == 2, processes
        return workers[1]

    code, errors, stderr = kill_worker_mid_run([*RAY_TWO_RANKS, *tiny_run], tmp_path, second_worker)
    assert code == 2
    assert len(errors) == 1, stderr[-3000:]
    assert "died" in errors[0] or "did not answer" in errors[0], errors[0]
    assert "rank" in errors[0]
    assert "Traceback" not in stderr.split(errors[0])[-1]


@pytest.mark.parametrize(
    ("cluster", "message"),
    [
        (
            {"n_gpus_per_node": 2, "placement": {"actor": "0-3", "rollout": "0-3"}},
            "role 'actor' is placed on devices [2, 3], beyond the cluster's 2",
        ),
        (
            {"n_gpus_per_node": 4, "placement": {"actor": "0-1", "rollout": "1-2"}},
            "cluster.placement: the rollout on devices [1, 2] shares [1] with the actor on [0, 1]",
        ),
        (
            # 3 workers of half a CPU: what a 2-CPU machine holds
            {"n_gpus_per_node": 3, "cpus_per_worker": 0.5},
            "data.train_batch_size = 16: × rollout.n (4) = 64 rows do not split evenly over 3",
        ),
        (
            {"n_gpus_per_node": 1024},  # more than any machine's CPUs
            "cluster asks for 1024 devices (cluster.n_gpus_per_node = 1024), each a worker",
        ),
    ],
)
def test_a_placement_the_launcher_cannot_run_fails_before_any_worker_starts(
    tmp_path, cluster, message, monkeypatch
):
    from rl.core.workers.ray_group import RayWorkerGroup

    started = []  # Ray workers (and the models they build) start only in RayWorkerGroup

    def refuse_to_start(self, *args, **kwargs):
        started.append(args)
        raise AssertionError("a Ray worker group was started")

    monkeypatch.setattr(RayWorkerGroup, "__init__", refuse_to_start)
    config = tmp_path / "run.yaml"
    config.write_text(json.dumps({"trainer": {"launcher": "ray"}, "cluster": cluster}))
    result = CliRunner().invoke(app, ["train", str(config), f"trainer.output_dir={tmp_path}"])
    assert result.exit_code == 2, result.output
    assert message in result.output.replace("\n", " ")
    assert started == []  # refused before Ray and before any model


def final_weights(output_dir):
    from safetensors.torch import load_file

    return load_file(str(Path(output_dir) / "hf" / "model.safetensors"))


@pytest.mark.ray
@pytest.mark.slow
def test_sigterm_to_the_driver_checkpoints_through_the_workers_and_resumes_bit_identical(
    tmp_path, rl_executable, tiny_run, descendants, process_gone
):
    """SIGTERM to the driver of a 2-rank Ray run (as a scheduler sends it) after its first
    checkpoint: the driver finishes the step, has its workers write their shards of a
    checkpoint of it (save_freq would not), exits 143 and leaves no Ray process behind; the
    same command then ends with the uninterrupted run's weights (world size 2, sharded
    checkpoints, each rank's RNG in them)."""
    args = [*RAY_TWO_RANKS, *tiny_run, "trainer.total_training_steps=5", "trainer.save_freq=2"]

    def start(out):
        return subprocess.Popen(
            [rl_executable, "train", *args, f"trainer.output_dir={out}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
        )

    straight = start(tmp_path / "straight")
    assert straight.wait(timeout=600) == 0, straight.stderr.read()[-3000:]
    killed_dir = tmp_path / "killed"
    run = start(killed_dir)
    marker = killed_dir / "checkpoints" / "global_step_2" / "manifest.json"
    deadline = time.time() + 600
    while not marker.exists() and run.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert run.poll() is None, "the run ended before it could be stopped"
    ray_processes = [pid for pid, _ in descendants(run.pid)]
    assert ray_processes
    run.send_signal(signal.SIGTERM)
    _, stderr = run.communicate(timeout=600)
    assert run.returncode == 143, stderr[-3000:]
    (stopped,) = [line for line in stderr.splitlines() if line.startswith("stopped by SIGTERM")]
    saved = max(
        int(p.name.split("_")[-1]) for p in (killed_dir / "checkpoints").glob("global_step_*")
    )
    assert saved >= 3 and f"checkpoint at step {saved}" in stopped, stopped
    for pid in ray_processes:  # the driver shut its Ray cluster down before it exited
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 0)
            assert process_gone(pid), f"{pid} outlived the stopped driver"
    resumed = start(killed_dir)
    assert resumed.wait(timeout=600) == 0, resumed.stderr.read()[-3000:]
    expected, got = final_weights(tmp_path / "straight"), final_weights(killed_dir)
    assert expected.keys() == got.keys()
    for name in expected:
        assert torch.equal(expected[name], got[name]), name
