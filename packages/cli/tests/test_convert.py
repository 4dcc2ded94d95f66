"""`rl convert` and `rl train --from verl` on the verl-dialect fixture of rl-core's tests:
the converted YAML loads as our config, and the converted run trains 2 steps on CPU with
a tiny model and a generated parquet."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from rl.core.config import load_config

ROOT = Path(__file__).resolve().parents[3]
VERL = ROOT / "packages" / "cli" / "tests" / "dialects" / "verl" / "grpo.yaml"


def test_rl_convert_detects_verl_and_writes_our_yaml(tmp_path, rl_executable):
    out = tmp_path / "ours.yaml"
    result = subprocess.run(
        [
            rl_executable,
            "convert",
            str(VERL),
            "actor_rollout_ref.model.path=builtin:tiny-qwen2",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "detected dialect: verl" in result.stdout
    # keys rl handles itself: one line per reason, after what matters
    assert "ignored     1 key(s), rl's checkpoints always hold" in result.stdout
    assert "actor_rollout_ref.actor.checkpoint.save_contents" in result.stdout
    config = load_config(out)
    assert config.actor.optim.lr == 1e-6 and config.cluster.n_gpus_per_node == 8
    bad = subprocess.run(
        [rl_executable, "convert", "--from", "verl", str(VERL)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "is '???' (mandatory)" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_rl_train_from_verl_runs_two_steps(tmp_path, rl_executable, metrics_rows):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [
        {
            "prompt": f"{a}+{b}=",
            "data_source": "arithmetic",
            "reward_model": {"ground_truth": str(a + b)},
        }
        for a in range(1, 6)
        for b in range(1, 6)
    ]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "train.parquet")
    result = subprocess.run(
        [
            rl_executable,
            "train",
            "--from",
            "verl",
            str(VERL),
            "actor_rollout_ref.model.path=builtin:tiny-qwen2",
            f"data.train_files={tmp_path / 'train.parquet'}",
            f"data.val_files={tmp_path / 'train.parquet'}",
            "+data.answer_key=reward_model.ground_truth",
            "data.max_prompt_length=16",
            "data.max_response_length=4",
            "data.train_batch_size=4",
            "actor_rollout_ref.actor.ppo_mini_batch_size=4",
            "actor_rollout_ref.rollout.name=hf",
            "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
            "trainer.n_gpus_per_node=1",
            "+trainer.device=cpu",
            "+trainer.total_training_steps=2",
            "trainer.logger=[console,jsonl]",
            f"trainer.default_local_dir={tmp_path / 'run'}",
            "+trainer.progress_bar=false",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "verl -> rl:" in result.stderr
    rows = metrics_rows(tmp_path / "run")
    assert [r["step"] for r in rows if "actor/grad_norm" in r] == [1, 2]


def test_rl_sft_from_verl_runs_and_rl_train_refuses_an_sft_config(
    tmp_path, rl_executable, metrics_rows, verl_release
):
    """verl 0.7.0's own sft_trainer.yaml (its epochs, cosine schedule with warm-up ratio,
    weight decay, betas, max_length over prompt and answer together), with a user's paths
    and batch: runs with nothing refused. Its epoch of 25 rows in batches of 8 is 3 steps
    (the partial batch dropped, as verl's dataloader), and the LR follows verl's cosine
    (warm-up int(3 x 0.1) = 0 steps): lr x (1 + cos(pi t / 3)) / 2."""
    import math

    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"question": f"{a}+{b}=", "answer": str(a + b)} for a in range(5) for b in range(5)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "train.parquet")
    sft = verl_release("0.7.0") / "verl" / "trainer" / "config" / "sft_trainer.yaml"
    overrides = [
        "model.partial_pretrain=builtin:tiny-qwen2",
        f"data.train_files={tmp_path / 'train.parquet'}",
        f"data.val_files={tmp_path / 'train.parquet'}",
        "data.train_batch_size=8",
        "data.max_length=64",
        "trainer.total_epochs=1",
        "trainer.n_gpus_per_node=1",
        "trainer.device=cpu",
        "model.enable_gradient_checkpointing=false",
        f"trainer.default_local_dir={tmp_path / 'run'}",
    ]
    command = [rl_executable, "sft", "--from", "verl", str(sft), *overrides]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "verl's SFT trainer config" in result.stderr and "WITHOUT" not in result.stderr
    recorded = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    sft_section = recorded["sft"]
    assert (sft_section["epochs"], sft_section["max_length"]) == (1, 64)
    assert (sft_section["weight_decay"], sft_section["betas"]) == (0.01, [0.9, 0.95])
    assert sft_section["lr_scheduler"] == "cosine" and sft_section["lr_warmup_ratio"] == 0.1
    logged = metrics_rows(tmp_path / "run")
    assert [r["step"] for r in logged] == [1, 2, 3]
    expected = [1e-5 * (1 + math.cos(math.pi * t / 3)) / 2 for t in range(3)]
    assert [r["sft/lr"] for r in logged] == [pytest.approx(lr, rel=1e-6) for lr in expected]
    assert (tmp_path / "run" / "hf" / "config.json").is_file()
    # a setting rl's SFT cannot honour is still refused by name
    custom = subprocess.run(
        [*command, "data.custom_cls.path=/my/dataset.py"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert custom.returncode == 2
    assert "data.custom_cls.path = '/my/dataset.py'" in custom.stderr
    refused = subprocess.run(
        [rl_executable, "train", "--from", "verl", str(sft), *overrides],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2
    assert "SFT trainer config: run it with `rl sft --from verl`" in refused.stderr


def test_rl_sft_from_verls_engine_sft_config_trains_on_conversations(
    tmp_path, rl_executable, metrics_rows, verl_release
):
    """verl 0.9.1's sft_trainer_engine.yaml (its only SFT config) on conversations in a
    `messages` column, as verl's multi-turn SFT reads them: 12 rows in batches of 4 are one
    epoch of 3 steps; the loss falls; nothing refused (the user turns are read, the
    assistant turns learned)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [
        {
            "messages": [
                {"role": "user", "content": f"{a}+{b}="},
                {"role": "assistant", "content": str(a + b)},
                {"role": "user", "content": "and times?"},
                {"role": "assistant", "content": str(a * b)},
            ]
        }
        for a in range(4)
        for b in range(3)
    ]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "train.parquet")
    config = verl_release("0.9.1") / "verl" / "trainer" / "config" / "sft_trainer_engine.yaml"
    command = [
        rl_executable,
        "sft",
        "--from",
        "verl",
        str(config),
        "model.path=builtin:tiny-qwen2",
        f"data.train_files={tmp_path / 'train.parquet'}",
        f"data.val_files={tmp_path / 'train.parquet'}",
        "data.train_batch_size=4",
        "data.max_length=64",
        "trainer.total_epochs=1",
        "trainer.device=cpu",
        "trainer.n_gpus_per_node=1",
        "trainer.logger=[console]",
        f"trainer.default_local_dir={tmp_path / 'run'}",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "WITHOUT" not in result.stderr
    logged = metrics_rows(tmp_path / "run")
    assert [r["step"] for r in logged] == [1, 2, 3]
    assert logged[-1]["sft/loss"] < logged[0]["sft/loss"]
    assert (tmp_path / "run" / "hf" / "config.json").is_file()
