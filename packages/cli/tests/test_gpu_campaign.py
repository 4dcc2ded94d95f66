"""The GPU campaign is ready to run (issue 36): every package's GPU tests collect on their
own, the wheel folder is complete and under 64 MiB, and the campaign's dry run installs
every file of it offline into a fresh virtualenv and imports it from there."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPTS = ROOT / "scripts"


def _run(*argv: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def test_gpu_tests_of_every_package_collect_alone():
    listed = _run(str(SCRIPTS / "gpu_test_files.py"))
    assert listed.returncode == 0, listed.stderr
    files = listed.stdout.split()
    assert "packages/core/tests/weight_sync/test_cuda_ipc.py" in files
    assert "packages/kernels/tests/test_logprob_gpu.py" in files
    collected = _run(
        "-m", "pytest", "-m", "gpu or multigpu", "--collect-only", "-q",
        "-p", "no:cacheprovider", "-p", "no:randomly", *files,
    )  # fmt: skip
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-3000:]
    ids = collected.stdout
    for expected in (
        "test_cuda_ipc.py::test_weights_cross_processes_through_cuda_ipc",
        "test_varlen_attention.py::test_shared_prompts_on_cuda_without_flash_attention",
        "test_varlen_attention.py::test_shared_prompts_on_flash_attention",
        "test_gpu.py::",
        "test_segment.py::",
        "test_varlen.py::",
    ):
        assert expected in ids, f"{expected} not collected:\n{ids[-3000:]}"
    # only GPU tests: the CPU tests of those files are deselected
    assert "test_message_round_trip_keeps_layout_and_handle" not in ids


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    pytest.importorskip("build", reason="the `build` package makes the rl-kernels sdist")
    out = tmp_path_factory.mktemp("gpu-wheels")
    built = _run(str(SCRIPTS / "gpu_wheels.py"), "--out", str(out))
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return out


@pytest.mark.slow
def test_the_wheel_folder_is_complete_and_under_64_mib(wheels):
    files = [*wheels.glob("*.whl"), *wheels.glob("*.tar.gz")]
    assert sum(f.stat().st_size for f in files) < 64 * 2**20
    manifest = (wheels / "MANIFEST.txt").read_text()
    assert all(f.name in manifest for f in files)
    names = {f.name.split("-")[0] for f in files}
    assert {"rl_core", "rl_fsdp", "rl_megatron", "rl_rollout", "rl_cli", "rl_kernels"} <= names
    assert {"pytest", "hypothesis", "omegaconf", "scikit_build_core", "pybind11"} <= names
    assert any(f.name.startswith("rl_kernels-") and f.name.endswith(".tar.gz") for f in files)


@pytest.mark.slow
def test_the_campaign_dry_run_installs_every_wheel_offline_and_plans_its_calls(wheels, tmp_path):
    done = _run(str(SCRIPTS / "gpu_campaign.py"), "--dry-run", "--wheels", str(wheels),
                "--work", str(tmp_path / "work"), "--results", str(tmp_path / "results"))  # fmt: skip
    out = done.stdout
    assert done.returncode == 0, out[-4000:] + done.stderr[-4000:]
    for call in ("gpu_tests", "bench_logprob_8192x4096x131072", "grpo_step_qwen2.5-0.5b",
                 "grpo_step_qwen2.5-1.5b", "total:"):  # fmt: skip
        assert call in out
    assert "--shape qwen2.5-1.5b" in out and "timeout 600s" in out
    for module in ("rl.kernels._C", "rl.core", "rl.bench", "pytest", "hypothesis", "omegaconf"):
        assert f"  ok  {module}\n" in out
    assert "dry run passed" in out


def test_the_dry_run_fails_on_a_folder_without_our_wheels(tmp_path):
    (tmp_path / "empty").mkdir()
    done = _run(str(SCRIPTS / "gpu_campaign.py"), "--dry-run", "--wheels", str(tmp_path / "empty"),
                "--work", str(tmp_path / "work"))  # fmt: skip
    assert done.returncode == 1
    assert "holds no wheels or no rl-kernels sdist" in done.stderr


def _campaign_module():
    spec = importlib.util.spec_from_file_location("gpu_campaign", SCRIPTS / "gpu_campaign.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_calls_run_in_turn_under_their_timeouts_and_the_summary_follows(tmp_path):
    campaign = _campaign_module()
    py = sys.executable
    calls = [
        campaign.Call("prints", [py, "-c", "print('hello from the call')"], expected_s=1),
        campaign.Call("fails", [py, "-c", "raise SystemExit(3)"], expected_s=1),
        campaign.Call("hangs", [py, "-c", "import time; time.sleep(60)"], 1, timeout_s=1),
        campaign.Call("no_vllm", [py, "-c", "pass"], 1, skipped="vllm is not installed"),
    ]
    summary = {"environment": {"device": "test"}}
    assert campaign.run_calls(calls, tmp_path, summary) == 2
    assert (tmp_path / "prints.log").read_text() == "hello from the call\n"
    written = json.loads((tmp_path / "summary.json").read_text())
    statuses = {call["name"]: call["status"] for call in written["calls"]}
    assert statuses == {
        "prints": 0,
        "fails": 3,
        "hangs": "timed out after 1s",
        "no_vllm": "skipped",
    }
    assert written["environment"] == {"device": "test"}
    assert not (tmp_path / "no_vllm.log").exists()


def test_the_environment_probe_names_versions_date_and_what_is_lacking():
    probe = _run(str(SCRIPTS / "gpu_campaign.py"), "--environment", timeout=120)
    assert probe.returncode == 0, probe.stderr
    found = json.loads(probe.stdout)
    assert found["versions"]["torch"] and found["versions"]["rl-core"]
    assert {"date", "device", "cuda_runtime", "driver", "python", "lacking"} <= set(found)
    if found["versions"]["vllm"] is None:
        assert "vllm" in found["lacking"]
