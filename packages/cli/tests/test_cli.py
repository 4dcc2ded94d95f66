"""The `rl` console script, run as a real subprocess and through typer's runner."""

import json
import subprocess

from typer.testing import CliRunner

from rl.cli.main import app


def test_version_lists_every_installed_rl_package(rl_executable):
    result = subprocess.run(
        [rl_executable, "--version"], capture_output=True, text=True, check=True
    )
    lines = dict(line.split() for line in result.stdout.splitlines())
    assert set(lines) >= {"rl-core", "rl-kernels", "rl-fsdp", "rl-megatron", "rl-rollout", "rl-cli"}
    assert lines["rl-cli"] == "0.1.0"


def test_doctor_json_reports_kernels_and_engines(rl_executable):
    result = subprocess.run(
        [rl_executable, "doctor", "--json"], capture_output=True, text=True, check=True, timeout=120
    )
    report = json.loads(result.stdout)
    kernels = {c["name"]: c["ok"] for c in report["compiled kernels"]}
    assert kernels["kernels: cpp"] is True
    engines = {c["name"] for c in report["engines"]}
    assert {"engine: train/fsdp", "engine: train/megatron", "engine: rollout/vllm"} <= engines
    third_party = {c["name"]: c for c in report["third-party"]}
    assert {"vLLM", "megatron-core", "Ray", "Triton", "SGLang"} <= set(third_party)


def test_doctor_table_escapes_extras_in_brackets():
    result = CliRunner().invoke(app, ["doctor"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "pip install 'rl-rollout[sglang]'" in result.output or "sglang 0" in result.output


def test_no_arguments_prints_help():
    result = CliRunner().invoke(app, [])
    assert "doctor" in result.output
