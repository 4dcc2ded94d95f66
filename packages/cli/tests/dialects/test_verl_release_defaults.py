"""Every verl release from 0.4.1 to the newest, as pip installs it (scripts/fetch-upstream.sh):
its own trainer configs with the GSM8K quickstart's overrides convert with nothing refused.
A release's default is what its users run without asking for anything, so a refusal of one
is a bug of ours: a key whose switch is off is not read, a value equal to what rl does maps.
And each of those defaults is still refused, or changes the run, once the user sets a value
that would train something else (a refusal that never fires would be as silent as a drop)."""

from __future__ import annotations

import pytest

from rl.cli.dialects import convert
from rl.cli.dialects.docs import VERL_RELEASES
from rl.core.config import config_from_mapping

FILES = ("ppo_trainer.yaml", "ppo_megatron_trainer.yaml")


@pytest.fixture(scope="module")
def quickstart(verl_quickstart):
    return verl_quickstart("/models/qwen", "/data/gsm8k/train.parquet", "/data/gsm8k/test.parquet")


def _config(verl_release, release: str, name: str):
    return verl_release(release) / "verl" / "trainer" / "config" / name


def _refused(conversion) -> dict[str, object]:
    return {e.source: e.value for e in conversion.report.entries if e.status == "unsupported"}


@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("release", VERL_RELEASES)
def test_the_release_defaults_convert_with_nothing_refused(verl_release, quickstart, release, name):
    conversion = convert("verl", _config(verl_release, release, name), quickstart)
    assert _refused(conversion) == {}
    config = config_from_mapping(conversion.config, "converted")
    assert config.actor.optim.lr == 1e-6 and config.critic.optim.lr == 1e-5
    megatron = name.startswith("ppo_megatron")
    assert (config.actor.strategy == "megatron") is megatron


def test_the_docs_name_every_release_the_fetch_script_installs():
    """One list: the releases the docs table names are the ones fetch-upstream.sh installs
    (and the root conftest's verl_release finds: it fails on any other)."""
    import re
    from pathlib import Path

    from rl.cli.dialects import docs

    script = Path(__file__).resolve().parents[4] / "scripts" / "fetch-upstream.sh"
    (line,) = re.findall(r"^VERL_VERSIONS=\((.*)\)$", script.read_text(), re.MULTILINE)
    assert tuple(line.split()) == VERL_RELEASES
    assert "| verl | " + ", ".join(VERL_RELEASES) in docs.render()


@pytest.fixture
def megatron(verl_release, quickstart):
    """`megatron(release, *overrides)`: that release's megatron trainer with the quickstart."""
    return lambda release, *extra: convert(
        "verl", _config(verl_release, release, "ppo_megatron_trainer.yaml"), [*quickstart, *extra]
    )


# (release, override of a default that is fine as shipped, the key that must then be refused)
TURNED_ON = [
    # megatron's optimizer state dtypes: fp32 is what rl keeps
    ("0.9.1", "actor_rollout_ref.actor.optim.exp_avg_dtype=bf16", None),
    # muon's keys are read once muon is the optimizer (which rl does not have)
    ("0.9.1", "actor_rollout_ref.actor.optim.optimizer=muon", "optim.muon_momentum"),
    # load_weight: false starts from random weights
    ("0.6.1", "actor_rollout_ref.actor.load_weight=False", None),
    # verl 0.6.0's rollout importance sampling is read once its threshold is set
    ("0.6.0", "algorithm.rollout_is_threshold=2.0", "algorithm.rollout_is_level"),
    # verl 0.7.0's reward manager: a class loaded from a file
    ("0.7.0", "reward_manager.source=importlib", "reward_manager.module.name"),
]


@pytest.mark.parametrize(("release", "override", "key"), TURNED_ON)
def test_a_default_that_would_train_something_else_once_changed_is_refused(
    megatron, release, override, key
):
    assert _refused(megatron(release)) == {}
    refused = _refused(megatron(release, override))
    changed = override.split("=")[0]
    assert changed in refused, refused
    assert key is None or any(k.endswith(key) for k in refused), refused


def test_megatrons_min_lr_becomes_our_ratio_of_the_learning_rate(megatron):
    conversion = megatron(
        "0.9.1",
        "actor_rollout_ref.actor.optim.min_lr=1e-7",
        "actor_rollout_ref.actor.optim.lr_decay_style=cosine",
        "critic.optim.lr_decay_style=linear",
    )
    config = config_from_mapping(conversion.config, "converted")
    assert config.actor.optim.min_lr_ratio == pytest.approx(0.1)
    assert config.actor.optim.lr_scheduler == "cosine"
    assert config.critic.optim.lr_scheduler == "linear" and config.critic.optim.min_lr_ratio == 0
    above = _refused(megatron("0.9.1", "actor_rollout_ref.actor.optim.min_lr=1e-5"))
    assert "actor_rollout_ref.actor.optim.min_lr" in above


def test_verl_070s_reward_manager_section_names_the_manager(verl_release, quickstart):
    path = _config(verl_release, "0.7.0", "ppo_trainer.yaml")
    naive = convert("verl", path, quickstart)
    dapo = convert("verl", path, [*quickstart, "reward_model.reward_manager=dapo"])
    assert config_from_mapping(naive.config, "c").reward.reward_manager == "naive"
    assert config_from_mapping(dapo.config, "c").reward.reward_manager == "dapo"
    prime = _refused(convert("verl", path, [*quickstart, "reward_manager.name=prime"]))
    assert list(prime) == ["reward_manager.name"]


@pytest.mark.parametrize("release", ["0.4.1", "0.6.1", "0.7.0"])
def test_the_dapo_options_of_older_releases_reward_section_map(verl_release, quickstart, release):
    """verl <= 0.7.0 keeps the DAPO manager's options in reward_model.reward_kwargs."""
    overlong = "+reward_model.reward_kwargs.overlong_buffer_cfg"
    conversion = convert(
        "verl",
        _config(verl_release, release, "ppo_trainer.yaml"),
        [
            *quickstart,
            "reward_model.reward_manager=dapo",
            f"{overlong}.enable=True",
            f"{overlong}.len=64",
            f"{overlong}.penalty_factor=0.5",
            "+reward_model.reward_kwargs.max_resp_len=512",
        ],
    )
    assert _refused(conversion) == {}
    buffer = config_from_mapping(conversion.config, "c").reward.overlong_buffer
    assert (buffer.enable, buffer.len, buffer.penalty_factor, buffer.max_resp_len) == (
        True,
        64,
        0.5,
        512,
    )


def test_profiling_options_never_refuse_and_never_change_the_run(verl_release, quickstart):
    """Profiling observes a run: with verl 0.5's nsight and NPU options read (profile_steps
    set) the run is the same one."""
    path = _config(verl_release, "0.5.0", "ppo_trainer.yaml")
    off = convert("verl", path, quickstart)
    on = convert("verl", path, [*quickstart, "trainer.profile_steps=[1,2]"])
    assert _refused(on) == {} and on.config == off.config
    ignored = [e.source for e in on.report.entries if e.status == "ignored"]
    assert "trainer.worker_nsight_options.trace" in ignored


SFT_RELEASES = [r for r in VERL_RELEASES if r <= "0.7.0"]  # sft_trainer.yaml's releases


@pytest.mark.parametrize("release", SFT_RELEASES)
def test_each_releases_sft_trainer_converts_for_rl_sft_with_nothing_refused(verl_release, release):
    """sft_trainer.yaml of each release that ships it (0.4.1 - 0.7.0), with a user's model
    and data: its epochs, cosine schedule with warm-up ratio, weight decay, betas and
    max_length all reach rl's SFT."""
    path = _config(verl_release, release, "sft_trainer.yaml")
    conversion = convert(
        "verl",
        path,
        [
            "model.partial_pretrain=/models/qwen",
            "data.train_files=/data/train.parquet",
            "data.val_files=/data/test.parquet",
        ],
    )
    assert conversion.job == "sft" and _refused(conversion) == {}
    sft = config_from_mapping(conversion.config, "sft").sft
    assert (sft.lr_scheduler, sft.lr_warmup_ratio, sft.weight_decay) == ("cosine", 0.1, 0.01)
    assert sft.betas == (0.9, 0.95) and sft.max_length == 1024 and sft.epochs >= 1


ENGINE_SFT_RELEASES = [r for r in VERL_RELEASES if r >= "0.6.0"]  # sft_trainer_engine.yaml


@pytest.mark.parametrize("release", ENGINE_SFT_RELEASES)
def test_each_releases_engine_sft_config_converts_for_rl_sft_with_nothing_refused(
    verl_release, release
):
    """sft_trainer_engine.yaml (verl's SFT trainer from 0.6.0; the only one from 0.7.1):
    conversations in `messages`, FSDP engine settings, epochs, max_length."""
    path = _config(verl_release, release, "sft_trainer_engine.yaml")
    conversion = convert(
        "verl",
        path,
        ["model.path=/models/qwen", "data.train_files=/data/t.parquet", "data.val_files=/d.pq"],
    )
    assert conversion.job == "sft" and _refused(conversion) == {}
    config = config_from_mapping(conversion.config, "sft")
    assert config.sft.enable and config.data.messages_key == "messages"
    assert config.model.path == "/models/qwen" and config.sft.max_length == 1024
    assert config.sft.epochs >= 1 and config.actor.strategy == "fsdp"


@pytest.mark.parametrize("release", ["0.4.1", "0.6.1"])
def test_launch_reward_fn_async_scores_in_the_background(verl_release, quickstart, release):
    """verl scores in a Ray task beside the log-prob passes; rl in a pool of its own."""
    path = _config(verl_release, release, "ppo_trainer.yaml")
    on = convert("verl", path, [*quickstart, "reward_model.launch_reward_fn_async=true"])
    config = config_from_mapping(on.config, "c")
    assert config.reward.launch_reward_fn_async and config.reward.num_workers == 1
    off = config_from_mapping(convert("verl", path, quickstart).config, "c")
    assert not off.reward.launch_reward_fn_async and off.reward.num_workers == 0
