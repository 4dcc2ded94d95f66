"""Preflight checks against the model's and the machine's limits, before any model loads:
the context length against the model's positions, the rollout's tensor parallelism
against the devices, and the trackers' credentials.

Each refusal is one line naming the key and the fix (a `ConfigError`); a tracker without
credentials logs offline instead, and says so.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from rl.core.config import Config, ConfigError
from rl.core.models.loading import model_source

log = logging.getLogger(__name__)


def model_positions(config: Config) -> int | None:
    """`max_position_embeddings` of model.path's config.json (of its text model, for a
    multi-modal config); None when it is not a local folder or does not say."""
    if config.model.path.startswith("builtin:"):
        return 512  # the tiny demo model's (rl.core.models.tiny)
    source = model_source(config.model)
    file = Path(source) / "config.json" if source else None
    if file is None or not file.is_file():
        return None
    try:
        hf_config: dict[str, Any] = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # the model loader reports an unreadable config by name
    positions = hf_config.get("max_position_embeddings")
    if positions is None and isinstance(hf_config.get("text_config"), dict):
        positions = hf_config["text_config"].get("max_position_embeddings")
    return positions if isinstance(positions, int) and positions > 0 else None


def check_context_length(config: Config) -> None:
    """Prompt plus response (or rollout.max_model_len) must fit the model's positions."""
    positions = model_positions(config)
    if positions is None:
        return
    data, rollout = config.data, config.rollout
    if rollout.max_model_len is not None and rollout.max_model_len > positions:
        raise ConfigError(
            f"rollout.max_model_len = {rollout.max_model_len} is more than the model's "
            f"{positions} positions (max_position_embeddings in {config.model.path}/"
            f"config.json): lower rollout.max_model_len to at most {positions}"
        )
    total = data.max_prompt_length + data.max_response_length
    if rollout.max_model_len is None and total > positions:
        raise ConfigError(
            f"data.max_prompt_length + data.max_response_length = {data.max_prompt_length} "
            f"+ {data.max_response_length} = {total} tokens is more than the model's "
            f"{positions} positions (max_position_embeddings in {config.model.path}/"
            "config.json): lower data.max_response_length or data.max_prompt_length so that "
            f"they add up to at most {positions}"
        )


def check_rollout_devices(config: Config) -> None:
    """One rollout replica spans rollout.tensor_parallel_size devices: the run needs that
    many, and a whole number of replicas."""
    tp = config.rollout.tensor_parallel_size
    cluster = config.cluster
    # CPU mode (num_cpus): one worker process, whatever n_gpus_per_node says
    devices = 1 if cluster.num_cpus else cluster.nnodes * cluster.n_gpus_per_node
    if config.trainer.launcher == "local" and tp > 1:
        raise ConfigError(
            f"rollout.tensor_parallel_size = {tp}: one rollout replica would span {tp} "
            "devices, but trainer.launcher=local runs one process on one device; set "
            "rollout.tensor_parallel_size=1 (or trainer.launcher=ray with "
            f"cluster.n_gpus_per_node >= {tp})"
        )
    if config.trainer.launcher == "ray" and not cluster.num_cpus:
        from rl.core.workers.launch import ray_layout

        try:  # rollout devices apart: checked there, by replica
            layout = ray_layout(config)
        except ConfigError:
            layout = None  # a placement it cannot read: refused below or by its own check
        if layout is not None and layout.disaggregated:
            return
    if tp > devices or devices % tp:
        raise ConfigError(
            f"rollout.tensor_parallel_size = {tp} does not fit the run's {devices} device(s) "
            f"(cluster.nnodes = {cluster.nnodes} x cluster.n_gpus_per_node = "
            f"{cluster.n_gpus_per_node}): set it to a divisor of {devices}"
        )


# the trackers that need an account: (logger name, API-key variable, mode variable,
# what logs in, the modes that need no account, the credentials files of a login)
_ACCOUNTS = (
    ("wandb", "WANDB_API_KEY", "WANDB_MODE", "wandb login", ("offline", "disabled", "dryrun")),
    (
        "swanlab",
        "SWANLAB_API_KEY",
        "SWANLAB_MODE",
        "swanlab login",
        ("offline", "local", "disabled"),
    ),
)


def check_tracker_credentials(config: Config, output_dir: str) -> list[str]:
    """A tracker without credentials (no API key, no login) logs offline into the run's
    folder, with a warning saying how to upload it later; one whose mode is set to online
    explicitly is refused instead. Returns the warnings given."""
    warnings = []
    for logger, key, mode_variable, login, offline_modes in _ACCOUNTS:
        if logger not in config.trainer.logger:
            continue
        mode = os.environ.get(mode_variable, "").strip().lower()
        if mode in offline_modes or os.environ.get(key) or _logged_in(logger):
            continue
        if mode == "online":
            raise ConfigError(
                f"trainer.logger includes {logger!r} and {mode_variable}=online, but there are "
                f"no credentials ({key} is unset and `{login}` was not run): set {key}, run "
                f"`{login}`, or set {mode_variable}=offline"
            )
        os.environ[mode_variable] = "offline"
        warnings.append(
            f"trainer.logger: {logger} has no credentials ({key} unset, no `{login}`): logging "
            f"offline under {output_dir}; `{logger} sync` uploads it later (set "
            f"{mode_variable}=online to require the account instead)"
        )
    for warning in warnings:
        log.warning(warning)
    return warnings


def _logged_in(logger: str) -> bool:
    """Whether a `wandb login` / `swanlab login` left credentials on this machine."""
    home = Path.home()
    if logger == "wandb":
        netrc = Path(os.environ.get("NETRC", home / ".netrc"))
        host = os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai").split("//")[-1]
        return _netrc_has(netrc, host.split("/")[0])
    folder = Path(os.environ.get("SWANLAB_SAVE_DIR", home / ".swanlab"))
    return (folder / ".netrc").is_file()


def _netrc_has(file: Path, host: str) -> bool:
    try:
        return f"machine {host}" in file.read_text(encoding="utf-8")
    except OSError:
        return False
