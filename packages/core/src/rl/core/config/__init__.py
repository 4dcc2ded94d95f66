"""Typed configuration: YAML + overrides -> frozen dataclasses (see schema.py)."""

from rl.core.config.convert import from_dict, to_dict
from rl.core.config.errors import ConfigError
from rl.core.config.loader import config_from_mapping, dump_config, load_config
from rl.core.config.schema import (
    ActorConfig,
    AlgorithmConfig,
    Config,
    CriticConfig,
    DataConfig,
    ModelConfig,
    OptimConfig,
    RefConfig,
    RewardConfig,
    RolloutConfig,
    SFTConfig,
    TrainerConfig,
)

__all__ = [
    "ActorConfig",
    "AlgorithmConfig",
    "Config",
    "ConfigError",
    "CriticConfig",
    "DataConfig",
    "ModelConfig",
    "OptimConfig",
    "RefConfig",
    "RewardConfig",
    "RolloutConfig",
    "SFTConfig",
    "TrainerConfig",
    "config_from_mapping",
    "dump_config",
    "from_dict",
    "load_config",
    "to_dict",
]
