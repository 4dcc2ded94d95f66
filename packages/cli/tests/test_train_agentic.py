"""`rollout.multi_turn.enable`: the RL step generates through the agent loop (tools
available, turns budgeted) and trains; the agent metrics are logged. The untrained tiny
model writes no tool calls, so each trajectory of the first test is one turn; the second
warm-starts it with the agentic demo's SFT (half the demonstrations call the calculator),
so real calls run the real tool and the model takes a second turn. Loss-masked rows are
covered by the engines' tests and the agent loop's."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

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


AGENTIC_DEMO = Path(__file__).resolve().parents[3] / "examples" / "agentic_calculator.yaml"
CALL = re.compile(r"calculator\(([0-9+*-]+)\)#(-?\d+)#")  # the call, then the tool's answer


def test_a_warm_started_model_calls_the_tool_and_reads_its_answer(
    tmp_path, rl_executable, metrics_rows
):
    """Validation before training and the training step both run the agent loop: calls
    are counted, trajectories take more than one turn, and each logged call is followed by
    the calculator's answer, checked here with Python's own arithmetic."""
    result = subprocess.run(
        [
            rl_executable,
            "train",
            str(AGENTIC_DEMO),
            "sft.steps=100",  # the calls are about 0.4 of the turns then (0.15 after 40)
            "trainer.total_training_steps=1",
            "rollout.n=4",
            "data.train_batch_size=8",
            "actor.ppo_mini_batch_size=8",
            "data.builtin_train_size=64",
            "data.builtin_val_size=16",
            "trainer.log_val_generations=16",
            "trainer.test_freq=-1",
            "trainer.progress_bar=false",
            f"trainer.output_dir={tmp_path}",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (step,) = [row for row in metrics_rows(tmp_path) if "actor/grad_norm" in row]
    assert step["agent/tool_calls_mean"] > 0 and step["agent/turns_mean"] > 1, step
    lines = (tmp_path / "val_generations.jsonl").read_text().splitlines()
    calls = [CALL.match(json.loads(line)["response"]) for line in lines]
    answered = [(m.group(1), int(m.group(2))) for m in calls if m is not None]
    assert answered, lines  # at least one call, with the tool's answer written back
    for expression, answer in answered:  # digits and + - * only; "08" read as 8
        plain = re.sub(r"\d+", lambda number: str(int(number.group())), expression)
        assert eval(plain) == answer, (expression, answer)


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
