"""`rl generate --from verl generation.yaml`: verl's main_generation job. Every release's
generation.yaml converts with nothing refused; on the tiny model it writes the input table
with `responses`, data.n_samples strings per row, sampled as the file says."""

from __future__ import annotations

import subprocess

import pytest

from rl.cli.dialects import convert
from rl.cli.dialects.docs import VERL_RELEASES
from rl.core.config import config_from_mapping

GENERATION_RELEASES = [r for r in VERL_RELEASES if r <= "0.7.0"]  # the wheels that ship it


@pytest.mark.parametrize("release", GENERATION_RELEASES)
def test_each_releases_generation_yaml_converts_with_nothing_refused(verl_release, release):
    path = verl_release(release) / "verl" / "trainer" / "config" / "generation.yaml"
    conversion = convert("verl", path, ["model.path=/models/qwen", "data.path=/data/p.parquet"])
    assert conversion.job == "generate"
    assert not conversion.report.refused()
    config = config_from_mapping(conversion.config, "generation")
    sampling = config.rollout.val_kwargs
    assert (sampling.n, sampling.temperature, sampling.top_k, sampling.top_p) == (5, 1.0, 50, 0.7)
    assert config.data.val_files == ("/data/p.parquet",)
    assert (config.data.max_prompt_length, config.data.max_response_length) == (1536, 512)


def test_rl_generate_writes_n_samples_responses_per_row(tmp_path, rl_executable, verl_release):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [
        {"prompt": [{"role": "user", "content": f"{a}+{a}="}], "data_source": "x", "id": a}
        for a in range(3)
    ]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "prompts.parquet")
    path = verl_release("0.7.0") / "verl" / "trainer" / "config" / "generation.yaml"
    command = [
        rl_executable,
        "generate",
        "--from",
        "verl",
        str(path),
        "model.path=builtin:tiny-qwen2",
        f"data.path={tmp_path / 'prompts.parquet'}",
        f"data.output_path={tmp_path / 'out' / 'gen.parquet'}",
        "data.n_samples=2",
        "rollout.name=hf",
        "rollout.prompt_length=32",
        "rollout.response_length=6",
        "trainer.n_gpus_per_node=1",
        "trainer.device=cpu",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "wrote 3 rows x 2 responses" in result.stdout
    table = pq.read_table(tmp_path / "out" / "gen.parquet").to_pylist()
    assert [row["id"] for row in table] == [0, 1, 2]  # the input rows, in order
    assert all(len(row["responses"]) == 2 for row in table)
    assert all(isinstance(text, str) for row in table for text in row["responses"])
    # the job is generation, not training
    refused = subprocess.run(
        [rl_executable, "train", "--from", "verl", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2 and "rl generate --from verl" in refused.stderr
