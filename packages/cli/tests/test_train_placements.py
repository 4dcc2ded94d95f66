"""Placement changes where the roles run, never what they train: the same tiny run on one
local process, on 2 Ray ranks taking turns (the hybrid engine) and with the actor on 2 Ray
ranks and the rollout on a third (disaggregated) gives the same step metrics; a killed
rollout worker of a disaggregated run ends it with one error naming role and rank."""

import json
import os
import subprocess

import pytest

pytest.importorskip("ray")

ENV = {**os.environ, "RAY_AUTH_MODE": "disabled"}
RUN = [
    "data.builtin_train_size=64",
    "data.builtin_val_size=8",
    "data.train_batch_size=8",
    "data.max_response_length=4",
    "actor.ppo_mini_batch_size=4",
    "actor.ppo_micro_batch_size_per_gpu=2",
    "rollout.n=2",
    "trainer.total_training_steps=2",
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
    "trainer.save_freq=-1",
    "trainer.progress_bar=false",
    "sft.steps=5",  # the demo's warm start, short
]
SPLIT = [
    "trainer.launcher=ray",
    "cluster.n_gpus_per_node=3",
    "cluster.placement={actor: [0, 1], rollout: [2]}",
    "cluster.cpus_per_worker=0.5",
]
PLACEMENTS = {
    "hybrid, 2 ranks": ["trainer.launcher=ray", "cluster.n_gpus_per_node=2"],
    "actor on 2 ranks, rollout on a third": SPLIT,
}
# what a placement may change: wall-clock times, memory, how weights moved, and how much
# prompt prefix a rank's micro-batches happened to share (an efficiency statistic)
PLACEMENT_STATISTICS = ("timing/", "perf/", "memory/", "weight_sync/", "actor/prompt_tokens_shared")


def train(rl_executable, output_dir, *overrides):
    result = subprocess.run(
        [rl_executable, "train", *RUN, *overrides, f"trainer.output_dir={output_dir}"],
        capture_output=True,
        text=True,
        timeout=900,
        env=ENV,
    )
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.fixture(scope="module")
def local_rows(tmp_path_factory, rl_executable):
    folder = tmp_path_factory.mktemp("local")
    train(rl_executable, folder)
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("placement", list(PLACEMENTS))
def test_a_placement_trains_what_one_local_process_trains(
    placement, local_rows, tmp_path, rl_executable, metrics_rows
):
    train(rl_executable, tmp_path, *PLACEMENTS[placement])
    rows = metrics_rows(tmp_path)
    assert [r["step"] for r in rows] == [r["step"] for r in local_rows] == [1, 2]
    for local, placed in zip(local_rows, rows, strict=True):
        compared = [k for k in local if not k.startswith(PLACEMENT_STATISTICS) and k != "time"]
        assert "actor/pg_loss" in compared and "actor/grad_norm" in compared
        assert set(compared) <= set(placed)
        for key in compared:
            assert placed[key] == pytest.approx(local[key], rel=1e-4, abs=1e-4), key
        # every sample came from the weights of the updates before its step
        assert placed["rollout/weight_version_lag"] == 0.0


@pytest.mark.ray
@pytest.mark.slow
def test_a_killed_rollout_worker_ends_a_disaggregated_run_naming_role_and_rank(
    tmp_path, kill_worker_mid_run
):
    def the_rollout_worker(processes):
        trainers = [pid for pid, args in processes if args.startswith("ray::RoleWorker")]
        rollouts = [pid for pid, args in processes if args.startswith("ray::RolloutWorker")]
        assert (len(trainers), len(rollouts)) == (2, 1), processes
        return rollouts[0]

    code, errors, stderr = kill_worker_mid_run([*RUN, *SPLIT], tmp_path, the_rollout_worker)
    assert code == 2
    assert len(errors) == 1, stderr[-3000:]
    assert errors[0].startswith("error: rollout."), errors[0]
    assert "rank 0" in errors[0] and ("died" in errors[0] or "did not answer" in errors[0])
