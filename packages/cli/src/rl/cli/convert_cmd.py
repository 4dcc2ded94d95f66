"""`rl convert`: another system's config as ours, with a report of every key."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from rl.cli.errors import exit_on_error

if TYPE_CHECKING:
    from rl.cli.dialects.report import Report
    from rl.core.config import Config

FROM_OPTION = typer.Option(
    None,
    "--from",
    help="The config's system: verl, roll, chatlearn or rlinf. "
    "Detected from the file when left out.",
)


def convert_config(
    dialect: str | None, source: Path, overrides: list[str], job: str | None = None
) -> tuple[Config, Report]:
    """Our validated Config and the conversion report for an upstream file and overrides;
    with `job` ("train", "sft"), a ConfigError when the file is for the other command."""
    from rl.cli.dialects import convert, detect
    from rl.core.config import ConfigError, config_from_mapping

    note = None
    if dialect is None:
        dialect = detect(source)
        note = f"detected dialect: {dialect} (pass --from to choose)"
    conversion = convert(dialect, source, overrides)
    if job is not None and conversion.job != job:
        raise ConfigError(
            f"{source} is {dialect}'s {'SFT' if conversion.job == 'sft' else 'RL'} trainer "
            f"config: run it with `rl {conversion.job} --from {dialect}`"
        )
    if note:
        conversion.report.notes.append(note)
    with naming_upstream_keys(conversion.report):
        config = config_from_mapping(conversion.config, f"the config converted from {source}")
    return config, conversion.report


@contextmanager
def naming_upstream_keys(report: Report) -> Iterator[None]:
    """A user error raised inside names the upstream key beside each of ours it mentions."""
    from rl.core.errors import UserError

    try:
        yield
    except UserError as error:
        error.args = (report.name_upstream(str(error)), *error.args[1:])
        raise


def convert(
    source: Path = typer.Argument(..., help="The upstream config file (YAML)."),
    overrides: list[str] = typer.Argument(
        None,
        help="Overrides in the upstream system's syntax (verl, ROLL, RLinf: Hydra's key=v, "
        "+key=v, ~key; ChatLearn: key=v).",
    ),
    dialect: str | None = FROM_OPTION,
    out: Path | None = typer.Option(None, "-o", "--out", help="Write our YAML here."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Report every key."),
) -> None:
    """Convert a verl, ROLL, ChatLearn or RLinf config to ours: prints (or writes) the
    YAML and reports every upstream key as mapped, default, ignored or unsupported."""
    with exit_on_error():
        from rl.core.config import dump_config

        config, report = convert_config(dialect, source, list(overrides or []))
        text = dump_config(config)
        if out is None:
            typer.echo(text, nl=False)
            typer.echo(report.render(verbose), err=True)
        else:
            out.write_text(text)
            typer.echo(report.render(verbose))
            typer.echo(f"wrote {out}")
