"""Placement changes where the roles run, never what they train: the same tiny run on one
local process, on 2 Ray ranks taking turns (the hybrid engine: actor, reference and rollout
replica on each rank, offloading between phases) and with the actor on 2 Ray ranks and the
rollout on a third (disaggregated) gives the same step and validation metrics and exports
its model; a killed rollout worker of a disaggregated run ends it with one error naming role
and rank. (That the demo learns is the local run's test, test_train.py: what these runs
equal step for step.)"""

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
    "actor.use_kl_loss=true",  # a reference role, colocated with the actor on Ray
    "trainer.total_training_steps=2",
    "trainer.val_before_train=true",
    "trainer.test_freq=2",  # validation before training and after the last step
    "trainer.save_freq=-1",
    "trainer.progress_bar=false",
    # the demo's warm start as it is (100 SFT steps, a second): rewards then differ within a
    # group and the updates train (after 5 steps every reward was 0, no update moved the
    # model, and the runs agreed trivially)
]
SPLIT = [
    "trainer.launcher=ray",
    "cluster.n_gpus_per_node=3",
    "cluster.placement={actor: [0, 1], rollout: [2]}",
    "cluster.cpus_per_worker=0.5",
]
PLACEMENTS = {
    "hybrid, 2 ranks": [
        "trainer.launcher=ray",
        "cluster.n_gpus_per_node=2",
        "actor.fsdp_config.param_offload=true",  # the colocated roles take turns
        "actor.fsdp_config.optimizer_offload=true",
    ],
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
    assert [r["step"] for r in rows] == [r["step"] for r in local_rows] == [0, 1, 2]
    for local, placed in zip(local_rows, rows, strict=True):
        compared = [k for k in local if not k.startswith(PLACEMENT_STATISTICS) and k != "time"]
        assert set(compared) <= set(placed)
        for key in compared:
            assert placed[key] == pytest.approx(local[key], rel=1e-4, abs=1e-4), key
    trained = [r for r in rows if "actor/pg_loss" in r]
    assert [r["step"] for r in trained] == [1, 2]
    assert all(r["actor/pg_loss"] != 0.0 and r["actor/grad_norm"] > 1e-3 for r in trained)
    assert all("actor/kl_loss" in r and "val/accuracy" in rows[0] for r in trained)
    # every sample came from the weights of the updates before its step
    assert all(r["rollout/weight_version_lag"] == 0.0 for r in trained)
    assert "val/accuracy" in rows[-1]
    assert (tmp_path / "hf" / "model.safetensors").exists()
    if "actor.fsdp_config.param_offload=true" in PLACEMENTS[placement]:
        # the actor's memory is measured after it woke for its update, on every rank
        assert all(r["memory/actor_after_gib"] > 0 for r in trained)


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
