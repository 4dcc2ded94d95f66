"""Preflight against the model's and the machine's limits, before any model loads: the
context length against the model's positions (read from model.path's config.json), the
rollout's tensor parallelism against the devices, and trackers without credentials."""

from __future__ import annotations

import json
import logging

import pytest

from rl.core.config import ConfigError, load_config
from rl.core.trainer.preflight_limits import (
    check_context_length,
    check_rollout_devices,
    check_tracker_credentials,
    model_positions,
)


@pytest.fixture
def folder(tmp_path):
    """A model folder whose config.json allows 256 positions (nothing else is read)."""
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 256}))
    return tmp_path


def config(*overrides):
    return load_config(overrides=list(overrides))


def test_the_context_must_fit_the_models_positions(folder):
    fits = config(
        f"model.path={folder}", "data.max_prompt_length=200", "data.max_response_length=56"
    )
    assert model_positions(fits) == 256
    check_context_length(fits)
    too_long = config(
        f"model.path={folder}", "data.max_prompt_length=200", "data.max_response_length=57"
    )
    with pytest.raises(ConfigError, match=r"200 \+ 57 = 257 tokens is more than the model's 256"):
        check_context_length(too_long)
    engine = config(f"model.path={folder}", "rollout.max_model_len=300")
    with pytest.raises(ConfigError, match=r"rollout.max_model_len = 300 is more than"):
        check_context_length(engine)


def test_text_config_positions_and_unknown_ones(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps({"text_config": {"max_position_embeddings": 64}})
    )
    assert model_positions(config(f"model.path={tmp_path}")) == 64
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 8}))
    assert model_positions(config(f"model.path={tmp_path}")) is None  # nothing to check
    assert model_positions(config()) == 512  # the built-in demo model


def test_rollout_tensor_parallelism_must_fit_the_devices():
    check_rollout_devices(config())
    with pytest.raises(ConfigError, match=r"rollout.tensor_parallel_size = 2: one rollout replica"):
        check_rollout_devices(config("rollout.tensor_parallel_size=2"))
    wide = ["trainer.launcher=ray", "cluster.n_gpus_per_node=4"]
    check_rollout_devices(config(*wide, "rollout.tensor_parallel_size=2"))
    with pytest.raises(ConfigError, match=r"does not fit the run's 4 device\(s\)"):
        check_rollout_devices(config(*wide, "rollout.tensor_parallel_size=3"))


@pytest.fixture
def no_account(monkeypatch, tmp_path):
    """No W&B / SwanLab key, login or mode on this machine (the modes are restored after)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("WANDB_API_KEY", "SWANLAB_API_KEY", "NETRC", "WANDB_BASE_URL", "SWANLAB_SAVE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WANDB_MODE", "")
    monkeypatch.setenv("SWANLAB_MODE", "")
    return tmp_path


@pytest.mark.parametrize(("logger", "mode"), [("wandb", "WANDB_MODE"), ("swanlab", "SWANLAB_MODE")])
def test_a_tracker_without_credentials_logs_offline_and_says_so(
    no_account, monkeypatch, caplog, logger, mode
):
    import os

    run = config(f"trainer.logger=[console,{logger}]")
    with caplog.at_level(logging.WARNING):
        (warning,) = check_tracker_credentials(run, "/runs/a")
    assert os.environ[mode] == "offline" and "logging offline under /runs/a" in warning
    assert warning in caplog.text
    monkeypatch.setenv(mode, "online")  # insisting on the account without one: refused
    with pytest.raises(ConfigError, match=rf"{mode}=online, but there are no credentials"):
        check_tracker_credentials(run, "/runs/a")


def test_a_tracker_with_credentials_is_left_alone(no_account, monkeypatch):
    import os

    monkeypatch.setenv("WANDB_API_KEY", "k" * 40)
    assert check_tracker_credentials(config("trainer.logger=[wandb]"), "/r") == []
    assert os.environ["WANDB_MODE"] == ""
    monkeypatch.delenv("WANDB_API_KEY")
    (no_account / ".netrc").write_text("machine api.wandb.ai\n  login user\n  password k\n")
    assert check_tracker_credentials(config("trainer.logger=[wandb]"), "/r") == []
    assert check_tracker_credentials(config("trainer.logger=[console]"), "/r") == []
