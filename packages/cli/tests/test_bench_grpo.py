"""`python -m rl.bench grpo-step`: a real (short) run of our side, its report and raw rows;
TRL's side where TRL is installed (the benchmark's own extra, not the default install)."""

import json
import subprocess
import sys

import pytest


def bench(tmp_path, *args):
    command = [sys.executable, "-m", "rl.bench", "grpo-step", "--steps", "3", "--rounds", "1"]
    done = subprocess.run(
        [*command, "--warmup", "1", "--out", str(tmp_path), *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "grpo_step.jsonl").read_text().splitlines()]
    return done.stdout, rows


def test_our_side_reports_steps_phases_memory_and_a_zero_first_kl(tmp_path):
    report, rows = bench(tmp_path, "--no-trl", "--variants", "kl")
    assert (tmp_path / "report.md").read_text() == report.removesuffix("\n")
    (ours,) = rows
    assert ours["side"] == "ours" and ours["variant"] == "kl" and len(ours["step_s"]) == 3
    assert all(t > 0 for t in ours["step_s"]) and ours["peak_rss_mib"] > 100
    # on-policy: no separate old-log-prob pass; the reference pass is there
    assert {"generate", "ref", "update_actor", "sync"} <= set(ours["phases"])
    assert "old_logprob" not in ours["phases"]
    assert ours["first_step_kl"] == 0.0  # the reference is the actor: bit for bit
    assert "| kl | ours |" in report and "Our phase split" in report


def test_unknown_variants_are_refused_with_the_choices(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "rl.bench", "grpo-step", "--variants", "kll", "--no-trl"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "choose from ['plain', 'kl']" in done.stderr


def test_trl_runs_the_same_workload_side_by_side(tmp_path):
    pytest.importorskip("trl")
    report, rows = bench(tmp_path, "--variants", "plain")
    assert [r["side"] for r in rows] == ["ours", "trl"]
    assert len(rows[1]["step_s"]) == 3
    assert "| plain | trl |" in report
