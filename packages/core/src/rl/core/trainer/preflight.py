"""Checks that need the machine, run after the config loads and before any model loads.

The schema (`rl.core.config`) checks what a value may be; this checks that the machine
can run it: CUDA when `trainer.device=cuda`, the engines and logger packages installed,
model, reward and data paths that exist, the checkpoint to resume from, the devices and
worker processes the placement asks for (`preflight_placement`), and the algorithm names
registered. Each failure is one line naming the key: a `ConfigError`,
or a `MissingDependencyError` when a package is to be installed. Nothing here loads a
model, reads a data file or reaches the network.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rl.core.config import Config, ConfigError
from rl.core.config.paths import python_file, user_path
from rl.core.data.reader import SUPPORTED
from rl.core.demo import BUILTIN_DATA, is_builtin
from rl.core.engine_contract import declares
from rl.core.engines import ExportsHF, PreflightedRollout, ScoresTokens
from rl.core.imports import MissingDependencyError, is_installed
from rl.core.models.loading import check_model_folder, check_model_path
from rl.core.registry import check_engine
from rl.core.trainer import agentic, modes
from rl.core.trainer.algorithm_setup import validate_algorithm_names
from rl.core.trainer.preflight_limits import (
    check_context_length,
    check_rollout_devices,
    check_tracker_credentials,
)
from rl.core.trainer.preflight_placement import check_placement
from rl.core.trainer.preflight_signal import warn_greedy_groups

log = logging.getLogger(__name__)

# trainer.logger backends that need a package of their own: (module, pip extra)
LOGGER_PACKAGES = {
    "tensorboard": ("tensorboard", "rl-core[tensorboard]"),
    "wandb": ("wandb", "rl-core[wandb]"),
    "mlflow": ("mlflow", "rl-core[mlflow]"),
    "swanlab": ("swanlab", "rl-core[swanlab]"),
}


def preflight(config: Config, *, with_rl_roles: bool = True) -> None:
    """Raise a one-line `UserError` naming the key if this machine cannot run `config`.

    `with_rl_roles=False` is `rl sft`: no rollout engine, critic or RL algorithm.
    """
    checks: list[Callable[[Config], None]] = [
        _device,
        _loggers,
        _model,
        check_context_length,
        _reward,
        _data,
        _output_dir,
        _resume,
        _train_engines,
        lambda config: check_placement(config, with_rl_roles=with_rl_roles),
    ]
    if with_rl_roles:
        checks += [
            check_rollout_devices,
            _rl_engines,
            validate_algorithm_names,
            warn_greedy_groups,
            agentic.check,
            modes.check,
            _launcher,
            _plan,
        ]
    for check in checks:
        check(config)
    check_tracker_credentials(config, config.trainer.output_dir)  # last: it may log offline


def _device(config: Config) -> None:
    if config.trainer.device != "cuda":
        return
    import torch

    if not torch.cuda.is_available():
        raise ConfigError(
            "trainer.device = 'cuda' is not allowed here: torch.cuda.is_available() is False "
            "(no GPU visible, or a CPU-only torch build); use trainer.device=cpu"
        )


def _loggers(config: Config) -> None:
    for name in config.trainer.logger:
        if name not in LOGGER_PACKAGES:
            continue
        module, extra = LOGGER_PACKAGES[name]
        if not is_installed(module):
            raise MissingDependencyError(
                f"trainer.logger includes {name!r}, but {module} is not installed: "
                f"pip install '{extra}'"
            )


def _model(config: Config) -> None:
    check_model_path(config.model.path, "model.path")
    check_model_folder(config.model)


def _reward(config: Config) -> None:
    from rl.core.agent import sandbox_boundary

    # a boundary asked for by name must exist here; `auto` is found (and said) when
    # sandboxed code first runs: most runs never run any
    if config.reward.sandbox.boundary != "auto":
        sandbox_boundary.choose(config.reward.sandbox.boundary)
    reward_model = config.reward.reward_model.path
    if reward_model is not None:
        check_model_path(reward_model, "reward.reward_model.path", builtins=())
    path = config.reward.custom_reward_function.path
    if path is None:
        return
    key, file = "reward.custom_reward_function.path", python_file(path)
    if not file.is_file():
        raise ConfigError(
            f"{key} = {path!r} does not exist; point it at a .py file (or pkg://a.module)"
        )
    if file.suffix != ".py":
        raise ConfigError(f"{key} = {path!r} is not a Python (.py) file")


def _data(config: Config) -> None:
    for key, files in (
        ("data.train_files", config.data.train_files),
        ("data.val_files", config.data.val_files),
    ):
        if is_builtin(files):
            continue  # generated in code
        for index, name in enumerate(files):
            _data_file(f"{key}[{index}]", name)


def _data_file(key: str, name: str) -> None:
    if name in BUILTIN_DATA:
        raise ConfigError(
            f"{key} = {name!r} is not allowed: a built-in data set must be the only file"
        )
    if name.startswith("builtin:"):
        raise ConfigError(
            f"{key} = {name!r} is not allowed: the built-in data sets are {', '.join(BUILTIN_DATA)}"
        )
    path = user_path(name)
    if not path.exists():
        raise ConfigError(f"{key} = {name!r} does not exist")
    if not path.is_file():
        raise ConfigError(f"{key} = {name!r} is a folder; list the data files in it")
    if path.suffix.lower() not in SUPPORTED:
        raise ConfigError(
            f"{key} = {name!r} is not a file type the reader knows: {', '.join(SUPPORTED)}"
        )


def _output_dir(config: Config) -> None:
    output_dir = config.trainer.output_dir
    if Path(output_dir).exists() and not Path(output_dir).is_dir():
        raise ConfigError(f"trainer.output_dir = {output_dir!r} is a file, not a folder")


def _resume(config: Config) -> None:
    """Only that the folder exists: the checkpoint's content is verified when resuming."""
    path = config.trainer.resume_from_path
    if config.trainer.resume_mode == "path" and path and not user_path(path).exists():
        raise ConfigError(f"trainer.resume_from_path = {path!r} does not exist")


def _train_engines(config: Config) -> None:
    check_engine(config.actor.strategy, "train", "actor.strategy")
    engine_class = _engine_checks(config, "actor")
    if not declares(engine_class, ExportsHF):
        raise ConfigError(
            f"actor.strategy = {config.actor.strategy!r}: that engine cannot write the trained "
            "model as a Hugging Face folder (it does not declare ExportsHF), which every run "
            "ends with; choose another train engine"
        )


def _engine_checks(config: Config, role: str) -> Any:
    """The train engine's own checks of the config (a parallel layout against the model's
    shapes and the world) when its class declares `Preflighted`; returns the class."""
    from rl.core.workers.build import preflight_train_engine

    return preflight_train_engine(config, role)


def _launcher(config: Config) -> None:
    """Ray installed, and a placement it can run (before any worker starts)."""
    if config.trainer.launcher != "ray":
        return
    if not is_installed("ray"):
        raise MissingDependencyError(
            "trainer.launcher = 'ray' needs Ray, which is not installed: pip install 'rl-core[ray]'"
        )
    from rl.core.workers.launch import ray_world

    ray_world(config)


def _plan(config: Config) -> None:
    """The batch arithmetic per rank and the memory estimate per device (`rl plan`):
    refuse what cannot divide or fit, and say the figures in one line."""
    from rl.core.plan import check_plan
    from rl.core.plan.summary import summary

    plan = check_plan(config)
    if plan is not None:
        log.info(summary(plan))


def _rl_engines(config: Config) -> None:
    if config.uses_critic:
        check_engine(config.critic.strategy, "train", "critic.strategy")
        _engine_checks(config, "critic")
    check_engine(config.rollout.name, "rollout", "rollout.name")
    from rl.core.registry import load_engine_class

    engine_class = load_engine_class(config.rollout.name, "rollout", key="rollout.name")
    if declares(engine_class, PreflightedRollout):  # the engine's own limits
        engine_class.preflight(config)
    if config.model.lora_rank > 0 and not declares(engine_class, ScoresTokens):
        raise ConfigError(  # each LoRA sync is checked by the probe (trainer.sync_probe)
            f"model.lora_rank > 0 with rollout.name = {config.rollout.name}: that engine cannot "
            "score tokens, which the check after each LoRA weight sync needs; use vllm or hf"
        )
