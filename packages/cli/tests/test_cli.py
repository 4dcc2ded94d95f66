"""The `rl` console script, run as a real subprocess and through typer's runner."""

import json
import subprocess

import pytest
from typer.testing import CliRunner

from rl.cli.dialects.docs import VERL_RELEASES
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
    # rl-cli adds the config dialects (rl-core has no Hydra), before the third-party packages
    assert list(report)[-2:] == ["config dialects", "third-party"]
    from rl.cli.dialects import DIALECTS, IMPLEMENTED

    dialects = {c["name"]: c["ok"] for c in report["config dialects"]}
    assert dialects == {f"dialect: {name}": name in IMPLEMENTED for name in DIALECTS}


def test_doctor_table_escapes_extras_in_brackets():
    result = CliRunner().invoke(app, ["doctor"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "pip install 'rl-rollout[sglang]'" in result.output or "sglang 0" in result.output


def test_no_arguments_prints_help():
    result = CliRunner().invoke(app, [])
    assert "doctor" in result.output


def test_rl_eval_scores_a_parquet_of_generations(tmp_path, rl_executable):
    """`rl eval` on verl's evaluation.yaml layout and on the table itself."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(
        [
            {
                "prompt": "2+3=",
                "data_source": "arithmetic",
                "reward_model": {"ground_truth": "5"},
                "responses": ["5", "6"],
            },
            {
                "prompt": "1+1=",
                "data_source": "arithmetic",
                "reward_model": {"ground_truth": "2"},
                "responses": ["2", "2"],
            },
        ]
    )
    pq.write_table(table, tmp_path / "gen.parquet")
    (tmp_path / "evaluation.yaml").write_text(
        f"data:\n  path: {tmp_path / 'gen.parquet'}\n  prompt_key: prompt\n"
        "  response_key: responses\n  data_source_key: data_source\n"
        "  reward_model_key: reward_model\ncustom_reward_function:\n  path: null\n"
        "  name: compute_score\n"
    )
    result = subprocess.run(
        [
            rl_executable,
            "eval",
            str(tmp_path / "evaluation.yaml"),
            "ks=[1,2]",
            "-o",
            str(tmp_path / "m.json"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert metrics["test_score/arithmetic"] == 0.75
    assert metrics["pass@1/arithmetic"] == 0.75 and metrics["pass@2/arithmetic"] == 1.0
    assert "test_score/arithmetic: 0.7500" in result.stdout
    bad = subprocess.run(
        [rl_executable, "eval", str(tmp_path / "gen.parquet"), "data.response_key=outputs"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2
    assert "row 0 has no column 'outputs' (data.response_key)" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_shell_completion_completes_sub_commands(rl_executable):
    """`rl --install-completion` / `--show-completion` (typer's): the completion script
    exists, and asking it as bash does completes a sub-command."""
    import os

    shown = subprocess.run(
        [rl_executable, "--show-completion", "bash"], capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0 and "_rl_completion" in shown.stdout
    env = {
        **os.environ,
        "_RL_COMPLETE": "complete_bash",
        "COMP_WORDS": "rl ev",
        "COMP_CWORD": "1",
    }
    completed = subprocess.run([rl_executable], capture_output=True, text=True, env=env, timeout=60)
    assert completed.stdout.split() == ["eval"]


@pytest.mark.parametrize("release", VERL_RELEASES)
def test_rl_eval_from_verl_reads_each_releases_evaluation_yaml(tmp_path, verl_release, release):
    """verl's own evaluation.yaml of every release (0.4's top-level ray_init included), its
    data.path pointed at a table of generations, as `main_eval` would read it."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [
        {
            "prompt": "2+3=",
            "data_source": "openai/gsm8k",
            "reward_model": {"ground_truth": "5"},
            "responses": ["#### 5", "#### 6"],
        }
    ]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "gen.parquet")
    config = verl_release(release) / "verl" / "trainer" / "config" / "evaluation.yaml"
    out = tmp_path / "m.json"
    arguments = ["eval", "--from", "verl", str(config), f"data.path={tmp_path / 'gen.parquet'}"]
    result = CliRunner().invoke(app, [*arguments, "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["test_score/openai/gsm8k"] == 0.5  # verl's gsm8k rule


def test_rl_eval_from_another_system_says_what_it_reads(tmp_path):
    result = CliRunner().invoke(app, ["eval", "--from", "roll", str(tmp_path / "x.yaml")])
    assert result.exit_code == 2 and "only verl's evaluation.yaml" in result.output
