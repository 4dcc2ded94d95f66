"""`rl config show`: print the fully resolved configuration."""

from __future__ import annotations

import typer

from rl.cli.errors import exit_on_user_error
from rl.cli.train import _split

config_app = typer.Typer(help="Inspect configurations.", no_args_is_help=True)


@config_app.command("show")
def show(
    config_and_overrides: list[str] | None = typer.Argument(
        None, metavar="[CONFIG.yaml] [KEY=VALUE ...]", help="A config file and/or overrides."
    ),
) -> None:
    """Print the resolved config (defaults + file + overrides, interpolations resolved)."""
    from rl.core.config import dump_config, load_config

    path, overrides = _split(config_and_overrides)
    with exit_on_user_error():
        typer.echo(dump_config(load_config(path, overrides)), nl=False)
