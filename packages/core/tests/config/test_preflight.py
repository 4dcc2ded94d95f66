"""`preflight`: what the machine must provide, refused before any model loads, in one line
naming the key (files, CUDA, installed engines and loggers, registered algorithm names)."""

import json
import sys

import pytest
import torch

from rl.core.config import ConfigError, load_config
from rl.core.errors import UserError
from rl.core.imports import MissingDependencyError
from rl.core.trainer import preflight as preflight_module
from rl.core.trainer.preflight import preflight


def refused(overrides, error_type=ConfigError, **kwargs):
    """The message preflight gives for `overrides` (asserting it is one line of `error_type`)."""
    config = load_config(overrides=overrides)
    with pytest.raises(error_type) as error:
        preflight(config, **kwargs)
    message = str(error.value)
    assert isinstance(error.value, UserError) and "\n" not in message, message
    return message


def hf_folder(path):
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    (path / "tokenizer.json").write_text("{}")  # (a folder without one is refused)
    return path


def test_the_default_config_passes(tmp_path):
    preflight(load_config(overrides=[f"trainer.output_dir={tmp_path}"]))


def test_cuda_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    message = refused(["trainer.device=cuda"])
    assert message.startswith("trainer.device = 'cuda' is not allowed here:")
    assert "torch.cuda.is_available() is False" in message


def test_model_path_that_does_not_exist(tmp_path):
    message = refused([f"model.path={tmp_path}/nope"])
    assert message == f"model.path = '{tmp_path}/nope' does not exist"


def test_model_path_that_is_not_a_model_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "weights.bin").write_text("")
    assert "has no config.json" in refused([f"model.path={tmp_path}/empty"])
    assert "is a file" in refused([f"model.path={tmp_path}/weights.bin"])
    assert "the only built-in model is 'builtin:tiny-qwen2'" in refused(["model.path=builtin:gpt"])


def test_model_path_in_a_local_folder_and_under_home(tmp_path, monkeypatch):
    hf_folder(tmp_path / "models" / "mine")
    preflight(load_config(overrides=[f"model.path={tmp_path}/models/mine"]))
    monkeypatch.setenv("HOME", str(tmp_path))
    preflight(load_config(overrides=["model.path=~/models/mine"]))


def test_hub_ids_pass_online_and_need_the_cache_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    preflight(load_config(overrides=["model.path=Qwen/Qwen2.5-0.5B-Instruct"]))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    message = refused(["model.path=Qwen/Qwen2.5-0.5B-Instruct"])
    assert message.startswith("model.path = 'Qwen/Qwen2.5-0.5B-Instruct' is not a local folder")
    assert "HF_HUB_OFFLINE" in message


def test_reward_paths(tmp_path):
    assert refused([f"reward.custom_reward_function.path={tmp_path}/nope.py"]) == (
        f"reward.custom_reward_function.path = '{tmp_path}/nope.py' does not exist; "
        "point it at a .py file (or pkg://a.module)"
    )
    assert "pkg://rl.nope' does not exist" in refused(
        ["reward.custom_reward_function.path=pkg://rl.nope"]
    )
    (tmp_path / "reward.txt").write_text("")
    message = refused([f"reward.custom_reward_function.path={tmp_path}/reward.txt"])
    assert "is not a Python (.py) file" in message
    message = refused([f"reward.reward_model.path={tmp_path}/rm"])
    assert message == f"reward.reward_model.path = '{tmp_path}/rm' does not exist"
    assert "builtin" in refused(["reward.reward_model.path=builtin:tiny-qwen2"])
    (tmp_path / "reward.py").write_text("def compute_score(**kwargs):\n    return 0.0\n")
    hf_folder(tmp_path / "rm")
    preflight(
        load_config(
            overrides=[
                f"reward.custom_reward_function.path={tmp_path}/reward.py",
                f"reward.reward_model.path={tmp_path}/rm",
            ]
        )
    )


def test_data_files(tmp_path, monkeypatch):
    (tmp_path / "train.jsonl").write_text("{}\n")
    (tmp_path / "notes.txt").write_text("")
    assert refused(["data.train_files=[/nope/train.parquet]"]) == (
        "data.train_files[0] = '/nope/train.parquet' does not exist"
    )
    message = refused([f"data.val_files=[{tmp_path}/train.jsonl,/nope/val.jsonl]"])
    assert message == "data.val_files[1] = '/nope/val.jsonl' does not exist"
    message = refused([f"data.train_files=[{tmp_path}/notes.txt]"])
    assert "is not a file type the reader knows: .parquet, .jsonl, .json, .csv" in message
    message = refused([f"data.train_files=[builtin:arithmetic,{tmp_path}/train.jsonl]"])
    assert message.startswith("data.train_files[0] = 'builtin:arithmetic' is not allowed")
    assert "'builtin:gsm8k'" in refused(["data.val_files=[builtin:gsm8k]"])
    monkeypatch.setenv("HOME", str(tmp_path))
    preflight(load_config(overrides=["data.train_files=[~/train.jsonl]"]))


def test_resume_path_must_exist(tmp_path):
    message = refused(["trainer.resume_mode=path", f"trainer.resume_from_path={tmp_path}/ckpt"])
    assert message == f"trainer.resume_from_path = '{tmp_path}/ckpt' does not exist"


def test_output_dir_that_is_a_file(tmp_path):
    (tmp_path / "out").write_text("")
    message = refused([f"trainer.output_dir={tmp_path}/out"])
    assert message == f"trainer.output_dir = '{tmp_path}/out' is a file, not a folder"


def test_engines_are_looked_up_under_their_keys():
    message = refused(["actor.strategy=deepspeed"])
    assert message.startswith("actor.strategy = 'deepspeed': no train engine named 'deepspeed'")
    assert "installed: fsdp" in message
    config = load_config(overrides=["actor.strategy=deepspeed"])
    with pytest.raises(LookupError):  # still what registry callers catch
        preflight(config)
    assert refused(["rollout.name=nope"]).startswith("rollout.name = 'nope': no rollout engine")
    preflight(load_config(overrides=["rollout.name=vllm"]))  # registered and importable


def test_a_registered_engine_whose_library_is_absent_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # find_spec("vllm") -> None: not installed
    message = refused(["rollout.name=vllm"], MissingDependencyError)
    assert message == (
        "rollout.name = 'vllm': the vllm rollout engine needs vllm: pip install 'rl-rollout[vllm]'"
    )


def test_the_critic_engine_only_when_a_critic_is_used():
    preflight(load_config(overrides=["critic.strategy=deepspeed"]))
    message = refused(["critic.strategy=deepspeed", "algorithm.adv_estimator=gae"])
    assert message.startswith("critic.strategy = 'deepspeed'")


def test_sft_needs_no_rollout_engine_nor_algorithm_names():
    preflight(
        load_config(overrides=["rollout.name=nope", "actor.policy_loss=trpo"]), with_rl_roles=False
    )


def test_an_engine_whose_dependency_is_missing(monkeypatch):
    monkeypatch.setattr(
        "rl.core.registry.is_installed", lambda module: "transformers" not in module
    )
    message = refused([], MissingDependencyError)
    assert message == (
        "actor.strategy = 'fsdp': the fsdp train engine needs transformers: pip install 'rl-fsdp'"
    )


def test_loggers_that_are_not_installed(monkeypatch):
    monkeypatch.setattr(preflight_module, "is_installed", lambda module: module != "wandb")
    message = refused(["trainer.logger=[console,wandb]"], MissingDependencyError)
    assert message == (
        "trainer.logger includes 'wandb', but wandb is not installed: pip install 'rl-core[wandb]'"
    )


def test_algorithm_names():
    message = refused(["critic.loss_agg_mode=sum"])
    assert message.startswith("critic.loss_agg_mode = 'sum' is not a known loss aggregation mode")


def test_an_unknown_home_folder_is_a_path_that_does_not_exist():
    assert refused(["model.path=~nobody_here/m"]) == "model.path = '~nobody_here/m' does not exist"
    message = refused(["reward.custom_reward_function.path=~nobody_here/r.py"])
    assert message.startswith("reward.custom_reward_function.path = '~nobody_here/r.py' does not")


def test_a_sandbox_boundary_this_machine_lacks(tmp_path, monkeypatch):
    from rl.core.agent import sandbox_boundary

    monkeypatch.setenv(sandbox_boundary.ENV, "auto")
    monkeypatch.setenv("PATH", str(tmp_path))  # neither bwrap nor unshare on it
    sandbox_boundary.why_not.cache_clear()
    sandbox_boundary._resolve.cache_clear()
    try:
        message = refused(["reward.sandbox.boundary=bwrap", f"trainer.output_dir={tmp_path}"])
        assert message.startswith("reward.sandbox.boundary = bwrap: bwrap is not on PATH;")
        with pytest.raises(ConfigError, match="reward.sandbox.boundary = 'sandboxed'"):
            load_config(overrides=["reward.sandbox.boundary=sandboxed"])  # refused at load
    finally:
        sandbox_boundary.why_not.cache_clear()
        sandbox_boundary._resolve.cache_clear()
