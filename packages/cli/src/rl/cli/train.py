"""`rl train` and `rl sft`: run a job from a YAML file (or the built-in demo) plus overrides."""

from __future__ import annotations

from pathlib import Path

import typer

from rl.cli.errors import exit_on_user_error


def _split(config_and_overrides: list[str] | None) -> tuple[Path | None, list[str]]:
    """The first argument is a YAML file unless it looks like an override (`key=value`)."""
    items = list(config_and_overrides or [])
    if items and "=" not in items[0]:
        return Path(items[0]), items[1:]
    return None, items


def train(
    config_and_overrides: list[str] | None = typer.Argument(
        None,
        metavar="[CONFIG.yaml] [KEY=VALUE ...]",
        help="A config file and/or dotted overrides; none runs the built-in CPU demo.",
    ),
) -> None:
    """Train with RL (GRPO, PPO, ...). With no config file: the embedded demo on the CPU."""
    from rl.core.config import load_config
    from rl.core.demo import DEMO_CONFIG
    from rl.core.trainer import run_training

    path, overrides = _split(config_and_overrides)
    path = path or DEMO_CONFIG
    with exit_on_user_error():
        config = load_config(path, overrides)
        run_training(config)


def sft(
    config_and_overrides: list[str] | None = typer.Argument(
        None, metavar="[CONFIG.yaml] [KEY=VALUE ...]", help="A config file and/or overrides."
    ),
) -> None:
    """Supervised fine-tuning (full-parameter) of the actor on prompt/answer pairs."""
    from rl.core.config import load_config
    from rl.core.trainer import run_sft

    path, overrides = _split(config_and_overrides)
    with exit_on_user_error():
        config = load_config(path, ["sft.enable=true", *overrides])
        run_sft(config)
