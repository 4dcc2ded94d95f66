"""`rl train` on a tiny Qwen3-MoE folder with routing replay R3: the HF rollout engine (in
bfloat16) records the routes, the FSDP actor (float32) replays them in the old-log-prob
pass and the updates; two steps train and the run's config records the mode."""

import subprocess

import pytest

MOE = {
    "hidden_size": 128,
    "intermediate_size": 128,
    "num_experts": 8,
    "experts_per_token": 2,
    "moe_intermediate_size": 64,
}


@pytest.mark.slow
def test_two_steps_with_rollout_routes_replayed(
    tmp_path, rl_executable, model_folder, metrics_rows
):
    folder = model_folder("qwen3-moe", **MOE)
    out = tmp_path / "out"
    result = subprocess.run(
        [
            rl_executable,
            "train",
            f"model.path={folder}",
            "actor.router_replay.mode=R3",
            "actor.old_log_prob_pass=always",  # the replaying old-log-prob pass runs too
            "rollout.dtype=bfloat16",
            "data.builtin_train_size=16",
            "data.builtin_val_size=4",
            "data.train_batch_size=4",
            "data.max_response_length=4",
            "actor.ppo_mini_batch_size=4",
            "rollout.n=2",
            "trainer.total_training_steps=2",
            "trainer.test_freq=-1",
            "trainer.progress_bar=false",
            "sft.steps=0",
            f"trainer.output_dir={out}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    rows = [r for r in metrics_rows(out) if "actor/pg_loss" in r]
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["mismatch/abs_logprob_diff"] > 0 for r in rows)  # bf16 vs fp32, measured
    assert "mode: R3" in (out / "config.yaml").read_text()
