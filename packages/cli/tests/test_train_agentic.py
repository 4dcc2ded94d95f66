"""`rollout.multi_turn.enable`: the RL step generates through the agent loop (tools
available, turns budgeted) and trains; the agent metrics are logged. The untrained tiny
model writes no tool calls, so each trajectory is one turn here; runs with tool turns are
the agentic demo's (test_agentic_demo.py), loss-masked rows are covered by the engines'
tests and the agent loop's."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from rl.cli.main import app


def test_a_multi_turn_run_trains_and_logs_agent_metrics(tmp_path, tiny_run, metrics_rows):
    result = CliRunner().invoke(
        app,
        [
            "train",
            *tiny_run,
            "trainer.total_training_steps=2",
            "sft.steps=0",
            "rollout.multi_turn.enable=true",
            "data.chat_template=native",
            "rollout.multi_turn.tools=[calculator,python]",
            "rollout.multi_turn.max_assistant_turns=2",
            f"trainer.output_dir={tmp_path}",
        ],
    )
    assert result.exit_code == 0, result.output
    rows = [row for row in metrics_rows(tmp_path) if "actor/grad_norm" in row]
    assert [row["step"] for row in rows] == [1, 2]
    assert all(row["agent/turns_mean"] >= 1 for row in rows)
    assert all("agent/truncated_rate" in row for row in rows)


@pytest.mark.parametrize("estimator", ["gae", "remax"])
def test_multi_turn_refuses_estimators_that_need_more_than_an_outcome(tmp_path, estimator):
    result = CliRunner().invoke(
        app,
        [
            "train",
            "rollout.multi_turn.enable=true",
            "data.chat_template=native",
            f"algorithm.adv_estimator={estimator}",
            f"trainer.output_dir={tmp_path}",
        ],
    )
    assert result.exit_code == 2
    assert (
        f"algorithm.adv_estimator = '{estimator}' with rollout.multi_turn.enable" in result.output
    )


@pytest.mark.ray
def test_multi_turn_rollouts_through_ray_workers(tmp_path, tiny_run, metrics_rows, monkeypatch):
    """The agent loop's generate_one calls reach rollout replicas on 2 Ray ranks."""
    pytest.importorskip("ray")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    result = CliRunner().invoke(
        app,
        [
            "train",
            *tiny_run,
            "trainer.total_training_steps=1",
            "sft.steps=0",
            "rollout.multi_turn.enable=true",
            "data.chat_template=native",
            "trainer.launcher=ray",
            "cluster.n_gpus_per_node=2",
            f"trainer.output_dir={tmp_path}",
        ],
    )
    assert result.exit_code == 0, result.output
    rows = [row for row in metrics_rows(tmp_path) if "actor/grad_norm" in row]
    assert [row["step"] for row in rows] == [1] and rows[0]["agent/turns_mean"] >= 1


def test_multi_turn_needs_the_chat_template(tmp_path):
    result = CliRunner().invoke(
        app,
        [
            "train",
            "rollout.multi_turn.enable=true",
            "data.chat_template=none",
            f"trainer.output_dir={tmp_path}",
        ],
    )
    assert result.exit_code == 2 and "data.chat_template auto or native" in result.output


ENVIRONMENT = """
from rl.core.agent.environment import EnvStep


class TwoSteps:
    '''Each episode: two actions, 0.25 each, then done; the task is the row's answer.'''

    def reset(self, task):
        self.steps, self.task = 0, task
        return f"task {task}"

    def step(self, action):
        self.steps += 1
        return EnvStep("again", 0.25, self.steps == 2)
"""


def test_an_environment_plays_each_trajectory_and_its_return_is_the_score(
    tmp_path, tiny_run, metrics_rows
):
    """Every model turn is one token (every token stops a turn), so each episode takes
    exactly two turns and returns 0.5: the scores are the environment's, not a reward
    function's (the demo data's arithmetic scorer would give 0 or 1)."""
    env_file = tmp_path / "two_steps.py"
    env_file.write_text(ENVIRONMENT)
    every_token = "[" + ",".join(str(i) for i in range(52)) + "]"
    result = CliRunner().invoke(
        app,
        [
            "train",
            *tiny_run,
            "trainer.total_training_steps=2",
            "sft.steps=0",
            "rollout.multi_turn.enable=true",
            "data.chat_template=native",
            f"rollout.multi_turn.environment={env_file}:TwoSteps",
            "data.max_response_length=16",
            f"rollout.stop_token_ids={every_token}",
            f"trainer.output_dir={tmp_path / 'run'}",
        ],
    )
    assert result.exit_code == 0, result.output
    rows = [row for row in metrics_rows(tmp_path / "run") if "actor/grad_norm" in row]
    assert [row["step"] for row in rows] == [1, 2]
    for row in rows:
        assert row["reward/env_return_mean"] == 0.5
        assert row["agent/turns_mean"] == 2.0 and row["agent/truncated_rate"] == 0.0


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("chess", "name a built-in environment (guess_number) or a class as"),
        ("/nope/env.py:Env", "/nope/env.py does not exist"),
    ],
)
def test_a_bad_environment_is_refused_by_key(tmp_path, spec, message):
    result = CliRunner().invoke(
        app,
        [
            "train",
            "rollout.multi_turn.enable=true",
            "data.chat_template=native",
            f"rollout.multi_turn.environment={spec}",
            f"trainer.output_dir={tmp_path}",
        ],
    )
    assert result.exit_code == 2
    assert f"rollout.multi_turn.environment = {spec!r}: {message}" in result.output
