"""`rl train` and `rl sft`: run a job from a YAML file (or the built-in demo) plus overrides."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from rl.cli.convert_cmd import ALLOW_OPTION, REPORT_OPTION
from rl.cli.errors import exit_on_error

if TYPE_CHECKING:
    from rl.core.config import Config

CONFIG_AND_OVERRIDES = "[CONFIG.yaml] [KEY=VALUE ...]"


CONFIG_OPTION = typer.Option(
    None,
    "--config",
    "-c",
    help="The YAML config file (this form also takes a file name with '=' in it).",
    dir_okay=False,
)


def _split(config_and_overrides: list[str] | None) -> tuple[Path | None, list[str]]:
    """The first argument is a YAML file unless it looks like an override (`key=value`)."""
    items = list(config_and_overrides or [])
    if items and "=" not in items[0]:
        return Path(items[0]), items[1:]
    return None, items


def config_and_overrides(
    config: Path | None, arguments: list[str] | None
) -> tuple[Path | None, list[str]]:
    """(config file, overrides) from `--config` and the positional arguments.

    Without `--config` the first argument is the file unless it contains '='; with it,
    every argument is an override.
    """
    if config is None:
        return _split(arguments)
    from rl.core.config import ConfigError

    overrides = list(arguments or [])
    for item in overrides:
        if "=" not in item:
            raise ConfigError(
                f"{item!r} is not an override (key.sub=value); --config {config} already "
                "names the config file"
            )
    return config, overrides


CHANGE_OPTION = typer.Option(
    None,
    "--allow-config-change",
    help="Resume with these settings changed from the checkpoint's config although they "
    "change what is trained (KEY[,KEY]; shell patterns such as 'actor.optim.*'); the change "
    "takes effect at the resumed step and is recorded in config_changes.jsonl "
    "(trainer.allow_config_change).",
)


def with_allowed_changes(config: Config, allowed: list[str] | None) -> Config:
    """`config` whose `trainer.allow_config_change` also holds --allow-config-change's keys."""
    keys = [key.strip() for item in allowed or () for key in item.split(",") if key.strip()]
    if not keys:
        return config
    trainer = config.trainer
    kept = tuple(trainer.allow_config_change)
    more = tuple(key for key in keys if key not in kept)
    return replace(config, trainer=replace(trainer, allow_config_change=kept + more))


FROM_OPTION = typer.Option(
    None,
    "--from",
    help="Run another system's config as it is (verl, roll, chatlearn, rlinf): the file "
    "and overrides in its syntax, converted first (`rl convert` shows how).",
)


def _run_converted(
    run: Callable[[Config], object],
    dialect: str,
    config: Path | None,
    arguments: list[str] | None,
    job: str,
    allow: list[str] | None,
    report_mode: str,
) -> None:
    """Run our Config from another system's file and overrides (the report on stderr);
    a refusal names the upstream key beside ours."""
    from rl.cli.convert_cmd import convert_config, naming_upstream_keys, report_is_full
    from rl.core.config import ConfigError

    items = list(arguments or [])
    if config is None and not items:
        raise ConfigError(f"--from {dialect} needs the {dialect} config file")
    source = config or Path(items.pop(0))
    converted, report = convert_config(
        dialect,
        source,
        items,
        job=job,
        allow=allow or (),
        show=lambda text: typer.echo(text, err=True),
        full=report_is_full(report_mode),
    )
    with naming_upstream_keys(report):
        run(converted)


def _refuse_allow_without_from(dialect: str | None, allow: list[str] | None) -> None:
    from rl.core.config import ConfigError

    if allow and dialect is None:
        raise ConfigError(
            "--allow-unsupported names upstream settings of a config run with --from; "
            "rl's own config has none to allow"
        )


def train(
    arguments: list[str] | None = typer.Argument(
        None,
        metavar=CONFIG_AND_OVERRIDES,
        help="A config file and/or dotted overrides; none runs the built-in CPU demo.",
    ),
    config: Path | None = CONFIG_OPTION,
    dialect: str | None = FROM_OPTION,
    allow: list[str] = ALLOW_OPTION,
    report: str = REPORT_OPTION,
    change: list[str] = CHANGE_OPTION,
) -> None:
    """Train with RL (GRPO, PPO, ...). With no config file: the embedded demo on the CPU.
    SIGTERM or Ctrl-C stops it after a checkpoint (exit 143 / 130); the same command then
    resumes."""
    with exit_on_error():
        from rl.core.config import load_config
        from rl.core.demo import DEMO_CONFIG
        from rl.core.trainer import run_training

        _refuse_allow_without_from(dialect, allow)

        def run(loaded: Config) -> object:
            return run_training(with_allowed_changes(loaded, change))

        if dialect is not None:
            _run_converted(run, dialect, config, arguments, "train", allow, report)
            return
        path, overrides = config_and_overrides(config, arguments)
        run(load_config(path or DEMO_CONFIG, overrides))  # preflight runs first


def sft(
    arguments: list[str] | None = typer.Argument(
        None, metavar=CONFIG_AND_OVERRIDES, help="A config file and/or overrides."
    ),
    config: Path | None = CONFIG_OPTION,
    dialect: str | None = FROM_OPTION,
    allow: list[str] = ALLOW_OPTION,
    report: str = REPORT_OPTION,
) -> None:
    """Supervised fine-tuning (full-parameter) of the actor on prompt/answer pairs (verl's
    SFT trainer config with --from verl)."""
    with exit_on_error():
        from rl.core.config import load_config
        from rl.core.trainer import run_sft

        _refuse_allow_without_from(dialect, allow)
        if dialect is not None:
            _run_converted(run_sft, dialect, config, arguments, "sft", allow, report)
            return
        path, overrides = config_and_overrides(config, arguments)
        run_sft(load_config(path, ["sft.enable=true", *overrides]))
