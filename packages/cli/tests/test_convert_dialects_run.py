"""The converted ROLL, ChatLearn and RLinf fixtures train: `rl convert` writes our YAML,
the devices, engines and sizes are shrunk to a CPU run (what a user changes to try a config
on a laptop), the algorithm stays as converted (ROLL's seq-mean-token-mean and linear decay
with a critic, ChatLearn's GSPO (its megatron trainer adds no KL loss), RLinf's REINFORCE++ baseline with
truncated IS and no dual clip), and `rl train` runs 2 steps on it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "packages" / "cli" / "tests" / "dialects"

CASES = {
    "roll": (FIXTURES / "roll" / "rlvr" / "rlvr_fsdp2_gae.yaml", ["+whiten_advantages=true"]),
    "chatlearn": (
        FIXTURES / "chatlearn" / "grpo_megatron.yaml",
        ["models.policy_trainer.use_group_sequence_policy=true"],
    ),
    # RLinf's reinpp KL is a return-to-go after the baseline, which rl refuses: without it
    "rlinf": (
        FIXTURES / "rlinf" / "math" / "grpo_fsdp_disaggregated.yaml",
        ["algorithm.reinpp_kl_beta=0"],
    ),
}
# the converted ChatLearn config scores as ChatLearn does: only its own data sources
SOURCES = {"chatlearn": "openai/gsm8k"}
CHECKS = {
    "roll": lambda c: (
        c["algorithm"]["adv_estimator"] == "gae"
        and c["actor"]["loss_agg_mode"] == "seq-mean-token-mean"
        and c["actor"]["optim"]["lr_scheduler"] == "linear"
    ),
    # ChatLearn's megatron trainer back-propagates the policy loss alone: no KL term
    "chatlearn": lambda c: c["actor"]["policy_loss"] == "gspo" and not c["actor"]["use_kl_loss"],
    "rlinf": lambda c: (
        c["algorithm"]["adv_estimator"] == "reinforce_plus_plus_baseline"
        and c["actor"]["tis_cap"] == 2.0
    ),
}


def _set(tree: dict, key: str, value) -> None:
    *parents, last = key.split(".")
    for part in parents:
        tree = tree.setdefault(part, {})
    tree[last] = value


def _cpu_run(config: dict, data: Path, out: Path) -> dict:
    """Devices, engines, model and sizes for a 2-step CPU run; the algorithm is untouched."""
    config.pop("cluster", None)
    for section in ("actor", "critic"):
        if section in config:
            for key in ("megatron", "fsdp_config"):
                config[section].pop(key, None)
            config[section]["strategy"] = "fsdp"
            config[section]["ulysses_sequence_parallel_size"] = 1
            config[section]["use_dynamic_bsz"] = False
            config[section]["ppo_mini_batch_size"] = 4
            config[section]["ppo_micro_batch_size_per_gpu"] = 2
            config[section].pop("ppo_max_token_len_per_gpu", None)
    config.setdefault("rollout", {}).update(
        name="hf", tensor_parallel_size=1, n=2, max_model_len=None, load_format="dummy"
    )
    config["rollout"].pop("engine_kwargs", None)
    for key, value in {
        "model.path": "builtin:tiny-qwen2",
        "model.dtype": "float32",
        "model.gradient_checkpointing": False,
        "data.train_files": [str(data)],
        "data.val_files": [str(data)],
        "data.max_prompt_length": 16,
        "data.max_response_length": 4,
        "data.train_batch_size": 4,
        "data.chat_template": "none",
        "data.prompt_key": "prompt",
        "data.answer_key": "answer",
        "trainer.device": "cpu",
        # one local process: the converted Ray launcher would spend ~15 s starting Ray and a
        # worker for a 2-step run (2 Ray ranks are test_train_placements.py's)
        "trainer.launcher": "local",
        "trainer.output_dir": str(out),
        "trainer.total_training_steps": 2,
        "trainer.logger": ["console", "jsonl"],
        "trainer.progress_bar": False,
        "trainer.val_before_train": False,
        "trainer.test_freq": -1,
        "trainer.save_freq": -1,
        "trainer.resume_mode": "disable",
        "trainer.resume_from_path": None,
    }.items():
        _set(config, key, value)
    return config


@pytest.mark.parametrize("dialect", sorted(CASES))
def test_a_converted_config_trains_two_steps(dialect, tmp_path, rl_executable, metrics_rows):
    import pyarrow as pa
    import pyarrow.parquet as pq

    source, overrides = CASES[dialect]
    rows = [
        {
            "prompt": f"{a}+{b}=",
            "answer": str(a + b),
            "data_source": SOURCES.get(dialect, "arithmetic"),
        }
        for a in range(1, 5)
        for b in range(1, 5)
    ]
    data = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist(rows), data)
    converted = tmp_path / "converted.yaml"
    result = subprocess.run(
        [
            rl_executable,
            "convert",
            "--from",
            dialect,
            str(source),
            *overrides,
            "-o",
            str(converted),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    config = yaml.safe_load(converted.read_text())
    assert CHECKS[dialect](config)
    run = tmp_path / "run.yaml"
    run.write_text(yaml.safe_dump(_cpu_run(config, data, tmp_path / "out")))
    result = subprocess.run(
        [rl_executable, "train", str(run)], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    steps = [r["step"] for r in metrics_rows(tmp_path / "out") if "actor/grad_norm" in r]
    assert steps == [1, 2]
