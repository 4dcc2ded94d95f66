"""`rl eval --model`: generate on the validation set with a model and score it. The metrics
are recomputed from the written generations (an independent reference), and the three forms
of PATH (HF folder, run folder, checkpoint) that hold the same weights give the same
greedy generations."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rl.cli.main import app
from rl.core.trainer.evaluate_model import metrics_by_source

VAL = ["data.builtin_val_size=6", "data.max_response_length=3", "trainer.progress_bar=false"]


def _brute_pass_at_k(correct: list[bool], k: int) -> float:
    subsets = list(itertools.combinations(range(len(correct)), k))
    return sum(any(correct[i] for i in s) for s in subsets) / len(subsets)


def test_metrics_by_source_match_their_definitions():
    scores = [1.0, 0.0, 0.0, 1.0, 0.5, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0]
    sources = ["a", "b", "a"]  # 4 responses per prompt
    metrics = metrics_by_source(sources, scores, 4, ks=(1, 2, 4))
    groups = {"a": [scores[0:4], scores[8:12]], "b": [scores[4:8]]}
    for source, rows in groups.items():
        assert metrics[f"test_score/{source}"] == pytest.approx(
            sum(sum(r) / 4 for r in rows) / len(rows)
        )
        for k in (1, 2, 4):
            brute = [_brute_pass_at_k([s >= 1.0 for s in r], k) for r in rows]
            assert metrics[f"pass@{k}/{source}"] == pytest.approx(sum(brute) / len(brute))
    assert metrics["val/accuracy"] == pytest.approx(6 / 12)
    assert metrics["eval/prompts"] == 3 and metrics["eval/responses"] == 12


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, tiny_run):
    out = tmp_path_factory.mktemp("run")
    result = CliRunner().invoke(
        app,
        [
            "train",
            *tiny_run,
            "trainer.total_training_steps=1",
            "trainer.save_freq=1",
            f"trainer.output_dir={out}",
            "trainer.val_before_train=false",
        ],
    )
    assert result.exit_code == 0, result.output
    return out


def _eval(model: Path, tmp_path: Path, *extra: str) -> tuple[dict, list[dict]]:
    generations, metrics_file = tmp_path / "gen.jsonl", tmp_path / "metrics.json"
    result = CliRunner().invoke(
        app,
        [
            "eval",
            "--model",
            str(model),
            *extra,
            "--generations",
            str(generations),
            "-o",
            str(metrics_file),
            *VAL,
        ],
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in generations.read_text().splitlines()]
    return json.loads(metrics_file.read_text()), rows


def test_online_eval_reports_what_its_generations_score(trained_run, tmp_path):
    metrics, rows = _eval(
        trained_run / "hf",
        tmp_path,
        "--ks",
        "1,3",
        "rollout.val_kwargs.n=3",
        "rollout.val_kwargs.temperature=1.0",
    )
    assert len(rows) == 6 * 3
    by_prompt = [rows[i : i + 3] for i in range(0, len(rows), 3)]
    assert all(len({r["prompt"] for r in group}) == 1 for group in by_prompt)
    sources = sorted({r["data_source"] for r in rows})
    for source in sources:
        groups = [g for g in by_prompt if g[0]["data_source"] == source]
        mean = sum(sum(r["score"] for r in g) / 3 for g in groups) / len(groups)
        assert metrics[f"test_score/{source}"] == pytest.approx(mean)
        for k in (1, 3):
            brute = [_brute_pass_at_k([r["score"] >= 1.0 for r in g], k) for g in groups]
            assert metrics[f"pass@{k}/{source}"] == pytest.approx(sum(brute) / len(brute))


def test_a_checkpoint_a_run_folder_and_its_hf_export_evaluate_alike(trained_run, tmp_path):
    """After 1 step, checkpoint step_1, the run's hf/ export and the run folder hold the
    same actor: greedy generations are identical."""
    step = next((trained_run / "checkpoints").glob("global_step_*"))
    results = [
        _eval(path, tmp_path / name)
        for name, path in (("ckpt", step), ("run", trained_run), ("hf", trained_run / "hf"))
        if (tmp_path / name).mkdir() is None
    ]
    responses = [[r["response"] for r in rows] for _, rows in results]
    assert responses[0] == responses[1] == responses[2]
    assert results[0][0] == results[1][0] == results[2][0]


def test_online_eval_refuses_what_it_cannot_evaluate(tmp_path):
    result = CliRunner().invoke(app, ["eval", "--model", str(tmp_path)])
    assert result.exit_code != 0
    assert "not a Hugging Face folder (config.json)" in result.output
    (tmp_path / "config.json").write_text("{}")
    result = CliRunner().invoke(app, ["eval", "--model", str(tmp_path), "--ks", "4", *VAL])
    assert result.exit_code != 0 and "pass@4 needs rollout.val_kwargs.n >= 4" in result.output
