"""`rl train` end to end: GRPO and PPO through the same controller, the outputs a run leaves,
resuming after SIGKILL, and the errors a user sees for bad input."""

import math
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM
from typer.testing import CliRunner

from rl.cli.main import app
from rl.core.config import load_config
from rl.core.demo import DEMO_CONFIG
from rl.core.trainer import run_training

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("estimator", "extra"),
    [
        ("grpo", []),
        ("gae", ["critic.ppo_mini_batch_size=4", "algorithm.lam=0.95"]),
        (
            "rloo",
            [
                "actor.use_kl_loss=true",
                "actor.policy_loss=gspo",
                "actor.loss_agg_mode=seq-mean-token-mean",
            ],
        ),
        (
            "reinforce_plus_plus",
            ["algorithm.use_kl_in_reward=true", "algorithm.kl_ctrl.type=adaptive"],
        ),
        ("remax", ["actor.policy_loss=cispo"]),
        (
            "reinforce_plus_plus_baseline",
            [
                "actor.use_kl_loss=true",
                "actor.kl_loss_type=k3+",
                "actor.loss_agg_mode=token-sum",
                "actor.loss_scale_factor=64",
                "algorithm.rollout_correction.rollout_is=sequence",
                "algorithm.rollout_correction.rollout_rs=geometric",
                "algorithm.rollout_correction.rollout_rs_threshold=1.5",
                "algorithm.rollout_correction.rollout_token_veto_threshold=1e-4",
            ],
        ),
    ],
)
def test_algorithms_run_through_the_same_controller(
    tmp_path, tiny_run, estimator, extra, metrics_rows
):
    config = load_config(
        DEMO_CONFIG,
        [
            *tiny_run,
            f"algorithm.adv_estimator={estimator}",
            f"trainer.output_dir={tmp_path}",
            *extra,
        ],
    )
    final_val = run_training(config)
    rows = metrics_rows(tmp_path)
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    assert "val/accuracy" in final_val and "sft/loss_last" in rows[0]
    step = rows[-1]
    assert {
        "reward/mean",
        "actor/pg_loss",
        "actor/grad_norm",
        "timing/generate",
        "timing/update_actor",
        "weight_sync/buckets",
        "response/length_mean",
    } <= set(step)
    if estimator == "gae":
        assert {"critic/vf_loss", "values/mean", "timing/values"} <= set(step)
    if "actor.use_kl_loss=true" in extra:
        assert "actor/kl_loss" in step and "timing/ref" in step
    if "algorithm.use_kl_in_reward=true" in extra:
        assert "actor/reward_kl_coef" in step
    if estimator == "remax":
        assert "timing/greedy_baseline" in step
    if any("rollout_correction" in override for override in extra):
        assert {
            "actor/is_weight_mean",
            "rollout_corr/rollout_is_mean",
            "rollout_corr/rollout_is_eff_sample_size",
            "rollout_corr/rollout_rs_masked_fraction",
            "rollout_corr/rollout_is_veto_fraction",
            "mismatch/kl",
        } <= set(step)
    for name in ("config.yaml", "metrics.png", "val_generations.jsonl", "hf/config.json"):
        assert (tmp_path / name).exists(), name
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
    assert model.config.model_type == "qwen2"
    for row in rows[1:]:
        check_step_values(row, estimator, extra, vocab_size=model.config.vocab_size)


def check_step_values(row, estimator, extra, vocab_size, max_response_length=3):
    """Each value of a training step's metrics row: finite and in its range, and present
    exactly where the algorithm computes it."""

    def within(key, low, high):
        assert low <= row[key] <= high, (key, row[key], (low, high))

    bad = {k: v for k, v in row.items() if isinstance(v, float) and not math.isfinite(v)}
    assert bad == {}, f"non-finite metrics at step {row['step']}"
    # the arithmetic task scores 0 or 1 per response, and no reward function failed
    for key in ("reward/mean", "reward/score_mean", "val/accuracy", "val/reward_mean"):
        if key in row:
            within(key, 0.0, 1.0)
    assert row["reward/error_rate"] == 0.0 and row["reward/errors"] == 0.0
    # a distribution over the vocabulary: 0 < entropy <= ln(vocabulary size)
    within("actor/entropy", 1e-6, math.log(vocab_size) + 1e-4)
    shares = [k for k in row if "clipfrac" in k or "fraction" in k or k.endswith("clip_ratio")]
    assert "actor/pg_clipfrac" in shares and "response/clip_ratio" in shares
    for key in shares:
        within(key, 0.0, 1.0)
    within("response/length_mean", 1.0, max_response_length)
    within("response/length_max", row["response/length_mean"], max_response_length)
    assert 0.0 < row["actor/ratio_min"] <= row["actor/ratio_mean"] <= row["actor/ratio_max"]
    assert row["actor/grad_norm"] >= 0.0 and row["actor/weight_norm"] > 0.0 and row["lr"] > 0.0
    for name in ("advantages", "returns"):
        assert row[f"{name}/min"] <= row[f"{name}/mean"] + 1e-6 <= row[f"{name}/max"] + 2e-6
    # the HF rollout engine's log-probs are the trainer's, recomputed on the same weights
    within("mismatch/abs_logprob_diff", 0.0, 1e-3)
    # a critic exactly for GAE (PPO); the others estimate without one
    critic = {k for k in row if k.startswith(("critic/", "values/"))}
    assert bool(critic) == (estimator == "gae"), sorted(critic)
    if estimator == "gae":
        assert row["critic/vf_loss"] >= 0.0 and row["critic/grad_norm"] >= 0.0
        assert row["values/min"] <= row["values/mean"] <= row["values/max"]
    # a KL loss (k3-type estimates: never negative) exactly where use_kl_loss is on
    assert ("actor/kl_loss" in row) == ("actor.use_kl_loss=true" in extra)
    if "actor/kl_loss" in row:
        assert row["actor/kl_loss"] >= 0.0
    assert ("actor/reward_kl_coef" in row) == ("algorithm.use_kl_in_reward=true" in extra)
    if "actor/reward_kl_coef" in row:
        assert row["actor/reward_kl_coef"] > 0.0
    if "actor/is_weight_mean" in row:
        assert row["actor/is_weight_mean"] > 0.0
        within("rollout_corr/rollout_is_eff_sample_size", 1e-6, 1.0 + 1e-6)


def start_run(rl_executable, tiny_run, output_dir, *overrides):
    args = [
        rl_executable,
        "train",
        *tiny_run,
        "trainer.total_training_steps=6",
        "trainer.save_freq=1",
        "trainer.max_ckpt_to_keep=2",
        f"trainer.output_dir={output_dir}",
        *overrides,
    ]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def final_weights(output_dir):
    return load_file(str(Path(output_dir) / "hf" / "model.safetensors"))


@pytest.mark.slow
def test_sigkill_after_a_checkpoint_then_rerun_ends_bit_identical(
    tmp_path, rl_executable, tiny_run, metrics_rows
):
    straight = start_run(rl_executable, tiny_run, tmp_path / "straight")
    assert straight.wait(timeout=600) == 0, straight.stderr.read()

    killed_dir = tmp_path / "killed"
    run = start_run(rl_executable, tiny_run, killed_dir)
    checkpoint = killed_dir / "checkpoints" / "global_step_3" / "trainer_state.pt"
    deadline = time.time() + 600
    while not checkpoint.exists() and run.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert run.poll() is None, "the run ended before it could be killed"
    os.kill(run.pid, signal.SIGKILL)
    run.wait()
    assert not (killed_dir / "hf").exists()

    resumed = start_run(rl_executable, tiny_run, killed_dir)
    assert resumed.wait(timeout=600) == 0, resumed.stderr.read()
    expected, got = final_weights(tmp_path / "straight"), final_weights(killed_dir)
    assert expected.keys() == got.keys()
    for name in expected:
        assert torch.equal(expected[name], got[name]), name
    assert [r["step"] for r in metrics_rows(killed_dir)] == list(range(7))  # no duplicates
    kept = sorted(p.name for p in (killed_dir / "checkpoints").glob("global_step_*"))
    assert kept == ["global_step_5", "global_step_6"]


@pytest.mark.slow
def test_the_demo_learns(tmp_path, rl_executable, metrics_rows):
    """The embedded default, as `rl train` runs it: validation accuracy rises clearly and
    does not fall back at the end.

    The bounds are margins, not a tuned threshold: over seeds 1-10 on one machine the gain
    was 0.53 ± 0.12 (never below 0.23; seed 1, run here: 0.57, and 0.57 again on torch's
    scalar kernels) and the last validation within 0.02 of the best (benchmarks/demo/).
    Other CPUs round differently and follow other trajectories, so the test asks for a
    gain of 0.15 and no fall-back of more than 0.10.
    """
    result = subprocess.run(
        [rl_executable, "train", f"trainer.output_dir={tmp_path}", "trainer.progress_bar=false"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    accuracy = [r["val/accuracy"] for r in metrics_rows(tmp_path) if "val/accuracy" in r]
    assert len(accuracy) >= 5
    assert accuracy[-1] - accuracy[0] >= 0.15, accuracy
    assert accuracy[-1] >= max(accuracy) - 0.10, accuracy


def test_example_file_is_the_embedded_demo():
    assert load_config(ROOT / "examples" / "arithmetic_grpo.yaml") == load_config(DEMO_CONFIG)
    for example in (ROOT / "examples").glob("*.yaml"):
        load_config(example)  # every shipped example is a valid config


def run_cli(*args):
    return CliRunner().invoke(app, ["train", *args])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["actor.clip_rato=0.3"], "Did you mean 'actor.clip_ratio'?"),
        (["rollout.temperature=hot"], "rollout.temperature = 'hot': expected a number"),
        (
            ["data.train_files=[/nope/train.parquet]"],
            "data.train_files[0] = '/nope/train.parquet' does not exist",
        ),
        (
            ["reward.custom_reward_function.path=/nope/reward.py"],
            "reward.custom_reward_function.path = '/nope/reward.py' does not exist",
        ),
        (
            ["algorithm.adv_estimator=ppo2"],
            "algorithm.adv_estimator = 'ppo2' is not a known advantage estimator",
        ),
        (
            ["actor.kl_loss_type=k4+"],
            "actor.kl_loss_type = 'k4+' is not a known KL estimator",
        ),
        (
            ["actor.loss_scale_factor=512"],
            "actor.loss_scale_factor = 512.0 has no effect with loss_agg_mode 'token-mean'",
        ),
        (
            ["algorithm.rollout_correction.rollout_rs=sequence"],
            "algorithm.rollout_correction: rollout_rs_threshold = None; allowed: a number > 0",
        ),
        (
            ["algorithm.rollout_correction.rollout_is=seq"],
            "algorithm.rollout_correction.rollout_is = 'seq' is not allowed; choose one of",
        ),
    ],
)
def test_bad_input_exits_with_a_clear_error(args, message, tmp_path):
    result = run_cli(*args, f"trainer.output_dir={tmp_path}")
    assert result.exit_code == 2
    assert message in result.output.replace("\n", " ")


def test_bad_rows_and_overlong_prompts_name_file_and_row(tmp_path):
    data = tmp_path / "train.jsonl"
    data.write_text(
        '{"prompt": "1+1=", "answer": "2", "data_source": "arithmetic"}\n'
        '{"question": "2+2=", "answer": "4"}\n'
    )
    result = run_cli(
        f"data.train_files=[{data}]", f"data.val_files=[{data}]", f"trainer.output_dir={tmp_path}"
    )
    assert result.exit_code == 2
    assert f"{data}, row 1: no prompt column 'prompt'" in result.output.replace("\n", "")
    data.write_text(
        '{"prompt": "1234567890+1234567890=", "answer": "0", "data_source": "arithmetic"}\n'
    )
    result = run_cli(
        f"data.train_files=[{data}]",
        f"data.val_files=[{data}]",
        "data.max_prompt_length=8",
        f"trainer.output_dir={tmp_path}",
    )
    assert result.exit_code == 2
    assert (
        "row 0: the prompt has 22 tokens, more than data.max_prompt_length = 8"
        in result.output.replace("\n", "")
    )


def test_config_show_prints_the_resolved_config(tmp_path):
    result = CliRunner().invoke(
        app, ["config", "show", str(DEMO_CONFIG), "trainer.experiment_name=x7"]
    )
    assert result.exit_code == 0
    assert "output_dir: outputs/x7" in result.output and "adv_estimator: grpo" in result.output


def test_rl_sft_trains_and_exports(tmp_path, tiny_run, metrics_rows):
    result = CliRunner().invoke(
        app, ["sft", str(DEMO_CONFIG), *tiny_run, "sft.steps=30", f"trainer.output_dir={tmp_path}"]
    )
    assert result.exit_code == 0, result.output
    losses = [r["sft/loss"] for r in metrics_rows(tmp_path)]
    assert len(losses) == 30 and losses[-1] < losses[0] * 0.7
    assert AutoModelForCausalLM.from_pretrained(tmp_path / "hf").config.model_type == "qwen2"


def test_tensorboard_sink_writes_events(tmp_path, tiny_run):
    config = load_config(
        DEMO_CONFIG,
        [
            *tiny_run,
            "trainer.total_training_steps=1",
            "sft.enable=false",
            "trainer.logger=[console,jsonl,tensorboard]",
            f"trainer.output_dir={tmp_path}",
        ],
    )
    run_training(config)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert "reward/mean" in events.Tags()["scalars"]


def test_reward_model_scores_the_rollouts(tmp_path, tiny_run, metrics_rows):
    from transformers import Qwen2Config, Qwen2ForSequenceClassification

    from rl.core.models import build_char_tokenizer

    tokenizer = build_char_tokenizer()
    torch.manual_seed(0)
    model = Qwen2ForSequenceClassification(
        Qwen2Config(
            vocab_size=len(tokenizer),
            hidden_size=64,
            num_hidden_layers=1,
            num_attention_heads=1,
            num_key_value_heads=1,
            intermediate_size=64,
            num_labels=1,
            pad_token_id=tokenizer.pad_token_id,
        )
    )
    model.save_pretrained(tmp_path / "rm")
    tokenizer.save_pretrained(tmp_path / "rm")
    config = load_config(
        DEMO_CONFIG,
        [
            *tiny_run,
            "trainer.total_training_steps=1",
            "sft.enable=false",
            f"reward.reward_model.path={tmp_path / 'rm'}",
            f"trainer.output_dir={tmp_path / 'run'}",
        ],
    )
    run_training(config)
    step = metrics_rows(tmp_path / "run")[-1]
    assert step["reward/errors"] == 0.0
    # A random reward model gives real-valued scores, not the rule-based 0/1.
    assert step["reward/mean"] not in (0.0, 1.0)
