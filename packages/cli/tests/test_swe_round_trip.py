"""A software-engineering task round-trips through an agent program: the task row (a small
repository with a bug, its issue) goes to the agent in its sandbox, the agent works with
its own tools (it writes the repository out, applies a patch with `patch -p1`, runs the
code) after asking the policy through its session, and answers with the patch; the run's
`swe_patch` reward applies that patch to the row's repository and runs the row's tests in
rl's sandbox. The agent that applies the right patch scores 1 on every sample, the one
that does not scores 0, and one that crashes is a counted failed sample (a step of them
trains under a lenient reward.max_error_rate; the default bound stops the run)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rl.core.agent.sandbox_boundary import why_not
from rl.core.config import load_config
from rl.core.errors import RewardError
from rl.core.trainer import run_training

AGENT = Path(__file__).parent / "swe" / "swe_agent.py"
FILES = {"calc.py": "def add(a, b):\n    return a - b\n"}
TESTS = "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n"


def rows():
    truth = json.dumps({"files": FILES, "tests": TESTS})
    return [
        {
            "prompt": f"Fix issue {i}: add() subtracts.",
            "answer": truth,
            "data_source": "swe_patch",
            "extra_info": {"files": FILES, "issue": "add() subtracts"},
        }
        for i in range(2)
    ]


@pytest.mark.skipif(bool(why_not("bwrap")), reason="bwrap does not work here")
@pytest.mark.parametrize(("patch", "score"), [("right", 1.0), ("wrong", 0.0), ("crash", 0.0)])
def test_the_agent_s_patch_is_scored_by_the_row_s_tests(tmp_path, metrics_rows, patch, score):
    # failures under reward.max_error_rate's bound: the crashing agent's step still trains
    run_training(config(tmp_path, patch, "reward.max_error_rate=1.0"))
    step = next(row for row in metrics_rows(tmp_path / "run") if "agent/sessions" in row)
    assert step["agent/sessions"] == 4 and step["reward/mean"] == score
    if patch == "crash":  # each sample failed, counted; the run trained on what was recorded
        assert step["agent/failed"] == step["agent/crashed"] == 4
        assert step["agent/turns_mean"] == 1 and "actor/grad_norm" in step
        return
    assert step["agent/failed"] == 0
    assert step["reward/applied"] == 1.0  # the patch applied; only the tests tell them apart


@pytest.mark.skipif(bool(why_not("bwrap")), reason="bwrap does not work here")
def test_agents_that_keep_failing_stop_the_run_by_the_reward_s_bound(tmp_path):
    with pytest.raises(RewardError, match=r"reward.max_error_rate.*the agent program exited"):
        run_training(config(tmp_path, "crash"))


def config(tmp_path, patch, *extra):
    data = tmp_path / "swe.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows()))
    command = json.dumps([sys.executable, str(AGENT), patch])
    return load_config(
        None,
        [
            f"data.train_files=[{data}]",
            f"data.val_files=[{data}]",
            "data.chat_template=native",
            "data.max_prompt_length=64",
            "data.max_response_length=16",
            "data.train_batch_size=2",
            "rollout.n=2",
            "rollout.multi_turn.enable=true",
            f"rollout.multi_turn.agent.command={command}",
            "rollout.multi_turn.agent.sandbox=bwrap",
            "actor.ppo_mini_batch_size=2",
            "sft.enable=false",
            "trainer.total_training_steps=1",
            "trainer.val_before_train=false",
            "trainer.test_freq=-1",
            f"trainer.output_dir={tmp_path / 'run'}",
            "trainer.logger=[jsonl]",
            "trainer.progress_bar=false",
            *extra,
        ],
    )
