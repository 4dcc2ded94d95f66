"""`python -m rl.bench grpo-step`: a real (short) run of our side, its report and raw rows;
TRL's side where TRL is installed (the benchmark's own extra, not the default install)."""

import json
import subprocess
import sys

import pytest


def bench(tmp_path, *args, timeout=600):
    command = [sys.executable, "-m", "rl.bench", "grpo-step", "--steps", "3", "--rounds", "1"]
    done = subprocess.run(
        [*command, "--warmup", "1", "--out", str(tmp_path), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
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
    assert done.returncode == 2 and "choose from ['plain', 'kl', 'invariant']" in done.stderr


def test_the_true_on_policy_variant_is_ours_alone_and_its_cost_is_reported(tmp_path):
    pytest.importorskip("trl")  # TRL present: it is still not run for this variant
    report, rows = bench(tmp_path, "--variants", "plain,invariant")
    assert [(r["side"], r["variant"]) for r in rows] == [
        ("ours", "plain"),
        ("trl", "plain"),
        ("ours", "invariant"),
    ]
    assert "Our invariant step against our plain one (hf, fused auto): " in report


def test_trl_runs_the_same_workload_side_by_side(tmp_path):
    pytest.importorskip("trl")
    report, rows = bench(tmp_path, "--variants", "plain")
    assert [r["side"] for r in rows] == ["ours", "trl"]
    assert len(rows[1]["step_s"]) == 3
    assert "| plain | trl |" in report


def test_real_shape_flags_are_refused_without_a_shape(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "rl.bench", "grpo-step", "--layers", "2", "--engines", "vllm"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "--layers, --engines apply to a real shape only: add --shape NAME" in done.stderr


@pytest.mark.slow  # a 151,936-token model folder and two real steps: ~1 min on 2 free cores
def test_our_side_at_a_real_shape_reports_memory_phases_and_mfu(tmp_path):
    """Qwen2.5-0.5B's shape at 1 layer, our HF side only; where TRL is installed the
    prompt ids of both sides are compared (TRL's own tokenization, no TRL training)."""
    import importlib.util

    report, rows = bench(
        tmp_path, "--shape", "qwen2.5-0.5b", "--layers", "1", "--steps", "2",
        "--variants", "plain", "--no-trl", timeout=1800,
    )  # fmt: skip
    (ours,) = rows
    assert ours["engine"] == "hf" and ours["fused"] == "auto" and len(ours["step_s"]) == 2
    # the process tree's peak (sampled) is at least this process's own last reading, and
    # holds the 151,936 x 896 embedding and its gradient and Adam moments (4 x 545 MB)
    assert ours["tree_peak_rss_mib"] > 2000
    assert {"generate", "update_actor"} <= set(ours["phase_peak_rss_mib"])
    assert max(ours["phase_peak_rss_mib"].values()) <= ours["tree_peak_rss_mib"]
    assert all(0 < n <= 32 for n in ours["response_len"])
    workload = json.loads((tmp_path / "workload.json").read_text())
    assert workload["shape"] == "qwen2.5-0.5b" and workload["model_config"]["vocab_size"] == 151936
    assert len(workload["prompt_lengths"]) == 16 and len(workload["gflops"]) == 2
    assert all(g > 0 for g in workload["gflops"])
    if importlib.util.find_spec("trl") is not None:
        assert "prompt token ids identical on both sides (16 rows)" in report
    assert "| plain | ours (hf) |" in report and "GFLOPS" in report
    assert "update_actor" in report and "MFU" in report
