"""The backends' own config sections (`actor.fsdp_config`, `actor.megatron`), contributed
through the engine registry: read and validated by the backend's dataclass, written back
under their keys, and refused by name when the backend is not installed."""

import pytest
import yaml

from rl.core.config import ConfigError, config_from_mapping, dump_config, load_config
from rl.core.config import sections as sections_module


def test_a_section_key_reaches_the_backends_dataclass_and_is_dumped_under_its_key():
    config = load_config(
        overrides=["actor.megatron.tensor_model_parallel_size=2", "critic.fsdp_config.fsdp_size=2"]
    )
    assert type(config.actor.megatron).__module__ == "rl.megatron.config"
    assert type(config.actor.fsdp_config).__module__ == "rl.fsdp.config"
    assert config.actor.megatron.tensor_model_parallel_size == 2
    assert config.critic.megatron.tensor_model_parallel_size == 1  # its own section
    assert config.critic.fsdp_config.fsdp_size == 2
    dumped = yaml.safe_load(dump_config(config))
    assert "backends" not in dumped["actor"]
    assert dumped["actor"]["megatron"]["tensor_model_parallel_size"] == 2
    assert config_from_mapping(dumped, "dumped") == config  # a run's config.yaml reloads


def test_the_backend_validates_its_section():
    with pytest.raises(ConfigError, match=r"actor.megatron.tensor_model_parallel_size = 0"):
        load_config(overrides=["actor.megatron.tensor_model_parallel_size=0"])
    with pytest.raises(ConfigError, match=r"unknown config key 'actor.fsdp_config.nope'"):
        load_config(overrides=["actor.fsdp_config.nope=1"])


def test_the_field_that_holds_them_is_not_a_key():
    with pytest.raises(ConfigError, match=r"'actor.backends'.*set by their own keys"):
        load_config(overrides=["actor.backends.x=1"])


def test_a_section_of_a_backend_that_is_not_installed_says_what_to_install(monkeypatch):
    only_fsdp = {"fsdp_config": sections_module.section_classes()["fsdp_config"]}
    monkeypatch.setattr(sections_module, "section_classes", lambda: only_fsdp)
    with pytest.raises(
        ConfigError,
        match=r"actor.megatron is the section of a backend that is not installed: "
        r"pip install rl-megatron",
    ):
        load_config(overrides=["actor.megatron.tensor_model_parallel_size=2"])
    assert not hasattr(load_config().actor, "megatron")
