"""`rl train` never runs a placement on fewer devices than it asks for: the demo asking
for 8 devices, and verl's own ppo_trainer.yaml (8 GPUs per node, rollout TP 2 in this
test) converted with `--from verl`, are refused in one line before any model loads,
naming our keys, the upstream ones, and the overrides that shrink the run; with those
overrides preflight passes."""

from __future__ import annotations

import os
import shlex
import subprocess

import pytest

from rl.cli.convert_cmd import convert_config
from rl.core.config import ConfigError, dump_config, load_config
from rl.core.trainer.preflight import preflight


def errors(result):
    return [line for line in result.stderr.splitlines() if line.startswith("error:")]


def test_the_demo_asking_for_8_devices_is_refused_before_anything_loads(tmp_path, rl_executable):
    out = tmp_path / "run"
    result = subprocess.run(
        [
            rl_executable,
            "train",
            "cluster.n_gpus_per_node=8",
            "trainer.total_training_steps=1",
            f"trainer.output_dir={out}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert errors(result) == [
        "error: cluster asks for 8 devices (cluster.n_gpus_per_node = 8), but "
        "trainer.launcher=local runs every role in this one process, on one device: pass "
        "cluster.n_gpus_per_node=1"
    ]
    assert "Traceback" not in result.stderr
    assert not out.exists()  # nothing started: no run folder, no model


@pytest.fixture
def verl_job(verl_release, tmp_path):
    """verl 0.9.1's ppo_trainer.yaml and overrides in verl's keys for a CPU with the
    built-in model, leaving verl's 8 GPUs per node and asking for rollout TP 2."""
    config = verl_release("0.9.1") / "verl" / "trainer" / "config" / "ppo_trainer.yaml"
    return config, [
        "actor_rollout_ref.model.path=builtin:tiny-qwen2",
        "critic.model.path=builtin:tiny-qwen2",
        "data.train_files=builtin:arithmetic",
        "data.val_files=builtin:arithmetic",
        "data.max_prompt_length=16",
        "data.max_response_length=4",
        "actor_rollout_ref.rollout.name=hf",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
        "trainer.n_gpus_per_node=8",
        "trainer.device=cpu",
        f"trainer.default_local_dir={tmp_path / 'run'}",
    ]


SHRINK = "cluster.n_gpus_per_node=2"  # verl runs 8 devices as Ray workers, so does rl


def test_a_verl_config_asking_for_8_gpus_is_refused_naming_both_keys(verl_job, rl_executable):
    config, overrides = verl_job
    result = subprocess.run(
        [rl_executable, "train", "--from", "verl", str(config), *overrides],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert "verl runs its 8 devices as Ray workers: so does rl" in result.stderr
    cpus = len(os.sched_getaffinity(0))
    if cpus != 2:
        pytest.skip(f"the shrink below is this 2-CPU machine's; this one has {cpus}")
    assert errors(result) == [
        "error: cluster asks for 8 devices (cluster.n_gpus_per_node [verl: "
        "trainer.n_gpus_per_node] = 8), each a worker process on trainer.device=cpu; this "
        "machine has 2 CPUs (cluster.cpus_per_worker = 1 each: room for 2): pass "
        "cluster.n_gpus_per_node=2"
    ]


def test_the_shrink_overrides_make_the_converted_config_pass_preflight(verl_job, tmp_path):
    """The refusal's overrides, in our keys on the converted config (`rl convert -o`, then
    `rl train ours.yaml ...`) or in verl's keys with `--from verl`: preflight passes."""
    source, overrides = verl_job
    config, report = convert_config("verl", source, overrides, job="train")
    with pytest.raises(ConfigError) as refusal:
        preflight(config)
    message = str(refusal.value)
    shrink = shlex.split(message.partition(": pass ")[2])
    assert [o.split("=")[0] for o in shrink] == [o.split("=")[0] for o in SHRINK.split()]
    ours = tmp_path / "ours.yaml"
    ours.write_text(dump_config(config))
    preflight(load_config(ours, shrink))
    upstream = {e.target: e.source for e in report.entries if e.status == "mapped"}
    in_verl = [f"{upstream[key]}={value}" for key, value in (o.split("=") for o in shrink)]
    assert in_verl == [f"trainer.n_gpus_per_node={shrink[0].split('=')[1]}"]
    preflight(convert_config("verl", source, [*overrides, *in_verl], job="train")[0])
