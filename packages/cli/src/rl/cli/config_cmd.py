"""`rl config show`: print the fully resolved configuration."""

from __future__ import annotations

from pathlib import Path

import typer

from rl.cli.errors import exit_on_error
from rl.cli.train import CONFIG_AND_OVERRIDES, CONFIG_OPTION, config_and_overrides

config_app = typer.Typer(help="Inspect configurations.", no_args_is_help=True)


@config_app.command("show")
def show(
    arguments: list[str] | None = typer.Argument(
        None, metavar=CONFIG_AND_OVERRIDES, help="A config file and/or overrides."
    ),
    config: Path | None = CONFIG_OPTION,
) -> None:
    """Print the resolved config (defaults + file + overrides, interpolations resolved)."""
    with exit_on_error():
        from rl.core.config import dump_config, load_config

        path, overrides = config_and_overrides(config, arguments)
        typer.echo(dump_config(load_config(path, overrides)), nl=False)
