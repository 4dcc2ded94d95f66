"""`trainer.mode: one_step_off`: step k+1's rollouts are generated, with the weights from
before step k's update, while step k learns. The staleness is real (the trainer's old
log-probs drift from the behaviour log-probs the rollouts carry, where sync mode keeps them
equal), the run trains and resumes, and a checkpoint keeps the prompts the next step drew
so that a resumed run draws them again."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from rl.cli.main import app

RUN = [
    "trainer.total_training_steps=4",
    "trainer.test_freq=-1",
    "trainer.val_before_train=false",
    "sft.steps=0",
    "actor.optim.lr=0.01",  # big updates: one step of staleness shows in the log-probs
    "actor.entropy_coeff=0.01",  # and every step updates, whatever the rewards
]


def _train(tmp_path, tiny_run, *extra):
    result = CliRunner().invoke(
        app, ["train", *tiny_run, *RUN, f"trainer.output_dir={tmp_path}", *extra]
    )
    assert result.exit_code == 0, result.output


def test_rollouts_are_one_step_stale_and_the_run_trains(tmp_path, tiny_run, metrics_rows):
    _train(tmp_path / "sync", tiny_run)
    _train(tmp_path / "off", tiny_run, "trainer.mode=one_step_off")
    sync_rows = [r for r in metrics_rows(tmp_path / "sync") if "actor/grad_norm" in r]
    off_rows = [r for r in metrics_rows(tmp_path / "off") if "actor/grad_norm" in r]
    assert [r["step"] for r in off_rows] == [1, 2, 3, 4]
    assert [r["rollout/staleness"] for r in off_rows] == [0.0, 1.0, 1.0, 1.0]
    assert all(r["timing/wait_rollout"] >= 0 for r in off_rows)
    # sync: the trainer recomputes the engine's own log-probs (equal up to float noise);
    # one step off: the rollouts of steps 2.. came from the weights before the last update
    assert max(r["mismatch/abs_logprob_diff"] for r in sync_rows) < 1e-4
    assert off_rows[0]["mismatch/abs_logprob_diff"] < 1e-4  # step 1: nothing stale yet
    assert min(r["mismatch/abs_logprob_diff"] for r in off_rows[1:]) > 1e-3


def test_bypass_mode_takes_the_stale_rollouts_logprobs_as_the_old_policys(
    tmp_path, tiny_run, metrics_rows
):
    """verl's one-step-off config turns bypass mode on: the ratio of the first update is
    pi / pi_rollout, which one step of staleness moves off 1 (where the actor's own old
    log-probs make it exactly 1), and no pass recomputes them. One mini-batch per step:
    the ratio is that of the weights the step starts from."""
    bypass = "algorithm.rollout_correction.bypass_mode=true"
    one_update = "actor.ppo_mini_batch_size=8"
    _train(tmp_path, tiny_run, "trainer.mode=one_step_off", bypass, one_update)
    rows = [r for r in metrics_rows(tmp_path) if "actor/grad_norm" in r]
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    assert all(r["actor/old_logprobs_from_update"] == 1.0 for r in rows)
    assert abs(rows[0]["actor/approx_kl"]) < 1e-4  # step 1: nothing stale yet
    assert min(abs(r["actor/approx_kl"]) for r in rows[1:]) > 1e-4


def test_a_one_step_off_checkpoint_resumes(tmp_path, tiny_run, metrics_rows):
    _train(
        tmp_path,
        tiny_run,
        "trainer.mode=one_step_off",
        "trainer.total_training_steps=2",
        "trainer.save_freq=2",
    )
    _train(tmp_path, tiny_run, "trainer.mode=one_step_off", "trainer.save_freq=2")
    steps = [r["step"] for r in metrics_rows(tmp_path) if "actor/grad_norm" in r]
    assert steps == [1, 2, 3, 4]


def test_one_step_off_refuses_remax(tmp_path):
    result = CliRunner().invoke(
        app,
        [
            "train",
            "trainer.mode=one_step_off",
            "algorithm.adv_estimator=remax",
            f"trainer.output_dir={tmp_path}",
        ],
    )
    assert result.exit_code == 2 and "one_step_off" in result.output


def test_one_step_off_refuses_roles_taking_turns_by_offloading(tmp_path):
    result = CliRunner().invoke(
        app,
        [
            "train",
            "trainer.mode=one_step_off",
            "actor.fsdp_config.param_offload=true",
            f"trainer.output_dir={tmp_path}",
        ],
    )
    assert result.exit_code == 2
    assert "actor.fsdp_config.param_offload with trainer.mode: one_step_off" in result.output


@pytest.mark.ray
def test_one_step_off_on_two_ray_ranks(tmp_path, tiny_run, metrics_rows, monkeypatch):
    """The rollout thread's calls and the updates reach the same Ray workers (colocated
    roles): each worker runs them one after the other, and the run trains."""
    pytest.importorskip("ray")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    _train(
        tmp_path,
        tiny_run,
        "trainer.mode=one_step_off",
        "trainer.launcher=ray",
        "cluster.n_gpus_per_node=2",
        "trainer.total_training_steps=3",
    )
    rows = [r for r in metrics_rows(tmp_path) if "actor/grad_norm" in r]
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert [r["rollout/staleness"] for r in rows] == [0.0, 1.0, 1.0]
