"""`rl plan`: the placement, batch arithmetic and memory estimate of what `rl train` would
run, from the same inputs (our YAML, upstream configs with --from), and refusals naming
the key (exit 2)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rl.cli.main import app
from rl.core.models.shapes import model_shape, shape_config


@pytest.fixture(scope="module")
def qwen_0_5b(tmp_path_factory):
    """A Qwen2.5-0.5B model folder as far as `rl plan` reads it: its config.json."""
    folder = tmp_path_factory.mktemp("qwen2.5-0.5b")
    hf = shape_config(model_shape("qwen2.5-0.5b"), num_layers=24, dtype="bfloat16")
    (folder / "config.json").write_text(json.dumps(hf))
    return folder


def test_demo_plan_prints_every_part_and_exits_0(rl_executable):
    result = subprocess.run([rl_executable, "plan"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "actor, rollout: one process, one device; they take turns" in out
    assert "32 prompts × 16 = 512 rows over 1 data-parallel rank(s): 512 per rank" in out
    assert "4 optimizer step(s) of ppo_mini_batch_size 8 × 16 = 128 rows" in out
    assert "2 micro-batch(es) per optimizer step of at most 64 rows" in out
    assert "1 replica(s)" in out and "32 prompts × 16 = 512 samples" in out
    assert "309.1 K parameters" in out
    assert out.rstrip().endswith("fits: the batches divide and every device fits the estimate")


def test_verl_quickstart_on_8_gpus_through_the_verl_dialect(
    verl_release, verl_quickstart, qwen_0_5b
):
    """verl's released ppo_trainer.yaml with its GSM8K quickstart overrides on 8 GPUs: 256
    rows, 32 per rank; 4 optimizer steps of 8 rows per rank = 2 micro-batches of 4; 8
    replicas of 32 prompts (PPO: n = 1)."""
    config = verl_release("0.7.1") / "verl" / "trainer" / "config" / "ppo_trainer.yaml"
    overrides = verl_quickstart(str(qwen_0_5b), "train.parquet", "test.parquet")
    args = ["plan", "--from", "verl", str(config), *overrides]
    args += ["trainer.n_gpus_per_node=8", "--device-memory-gb", "80"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "devices 0-7 (node 0): actor, rollout, critic; they take turns" in out
    assert "actor: 256 prompts × 1 = 256 rows over 8 data-parallel rank(s): 32 per rank" in out
    assert "2 micro-batch(es) per optimizer step of at most 4 rows" in out
    assert "8 replica(s) (8 device(s) ÷ tensor_parallel_size 1), each draws 32 prompts" in out
    assert "494.0 M parameters" in out
    assert "each device has 80.00 GiB (cluster.device_memory_gb)" in out
    # vLLM claims gpu_memory_utilization (0.4) of the 80 GiB device
    assert "rollout 32.00 GiB" in out


def test_rows_that_cannot_split_exit_2_naming_the_key():
    result = CliRunner().invoke(
        app,
        ["plan", "trainer.launcher=ray", "cluster.n_gpus_per_node=3", "rollout.n=1"],
    )
    assert result.exit_code == 2
    assert "error: data.train_batch_size = 32" in result.output
    assert "use a multiple of 3" in result.output


def test_a_device_too_small_exits_2_naming_the_key(qwen_0_5b):
    args = ["plan", f"model.path={qwen_0_5b}", "trainer.device=cuda", "cluster.device_memory_gb=2"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert "error: actor needs ~" in result.output
    assert "cluster.device_memory_gb" in result.output


def test_a_disaggregated_rlinf_placement_plans_each_side_on_its_devices(qwen_0_5b):
    """An RLinf file with the rollout on devices 0-3 and the actor on 6-7: 2 train ranks of
    64 rows, 4 replicas of 8 prompts × 4; each device group holds its own role alone."""
    folder = Path(__file__).parent / "dialects" / "rlinf" / "math"
    args = ["plan", "--from", "rlinf", str(folder / "grpo_fsdp_disaggregated.yaml")]
    args += [f"rollout.model.model_path={qwen_0_5b}", f"actor.model.model_path={qwen_0_5b}"]
    args += ["+cluster.num_gpus_per_node=8", "algorithm.reinpp_kl_beta=0"]
    result = CliRunner().invoke(app, [*args, "--device-memory-gb", "512"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "devices 0-3 (node 0): rollout\n  devices 6-7 (node 0): actor\n" in out
    assert "128 rows over 2 data-parallel rank(s): 64 per rank" in out
    assert "4 replica(s) (4 device(s) ÷ tensor_parallel_size 1), each draws 8 prompts" in out
    assert "  devices 0-3: peak" in out and "  devices 6-7: peak" in out
