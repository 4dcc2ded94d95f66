"""`rl convert`: another system's config as ours, with a report of every key."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
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
    dialect: str | None,
    source: Path,
    overrides: list[str],
    job: str | None = None,
    allow: Sequence[str] = (),
    show: Callable[[str], None] | None = None,
    full: bool = False,
) -> tuple[Config, Report]:
    """Our validated Config and the conversion report for an upstream file and overrides;
    `show` gets the report (ranked; every key when `full`) before anything is refused. A
    ConfigError when a setting that changes training cannot be honoured and is not in
    `allow` (`refusal`), or with `job` ("train", "sft") when the file is for the other
    command."""
    from rl.cli.dialects import convert, detect, refusal
    from rl.core.config import ConfigError, config_from_mapping

    note = None
    if dialect is None:
        dialect = detect(source)
        note = f"detected dialect: {dialect} (pass --from to choose)"
    conversion = convert(dialect, source, overrides)
    report = conversion.report
    if job is not None and conversion.job != job:
        what = {"sft": "SFT trainer", "generate": "generation"}.get(conversion.job, "RL trainer")
        raise ConfigError(
            f"{source} is {dialect}'s {what} config: run it with "
            f"`rl {conversion.job} --from {dialect}`"
        )
    if note:
        report.notes.append(note)
    try:
        dropped = refusal.settle(report, refusal.patterns(allow))
    except ConfigError:
        if show is not None:
            show(report.render(full, refusing=True))
        raise
    if show is not None:
        show(report.render(full))
    values = conversion.config
    if dropped:
        values = {**values, "trainer": {**values.get("trainer", {}), "dropped_settings": dropped}}
    with naming_upstream_keys(report):
        config = config_from_mapping(values, f"the config converted from {source}", conversion.own)
    if "launcher" not in values.get("trainer", {}) and not any(
        o.startswith("trainer.launcher=") for o in conversion.own
    ):
        config, note = _ray_for_several_devices(config, report.dialect)
        if note:
            report.notes.append(note)
            if show is not None:
                show(note)
    return config, report


def _ray_for_several_devices(config: Config, dialect: str) -> tuple[Config, str]:
    """Every system rl imports runs a job of several devices as one Ray worker per device:
    so does rl (trainer.launcher=ray) when the converted placement uses more than one and
    the launcher was not chosen. Preflight then checks that this machine has them."""
    from rl.core.config import ConfigError
    from rl.core.config.overrides import apply_overrides
    from rl.core.trainer.preflight_placement import cluster_placement, used_devices
    from rl.core.workers.launch import needed_roles

    try:
        used = used_devices(cluster_placement(config), needed_roles(config))
    except ConfigError:
        return config, ""  # preflight says what is wrong with the placement
    if len(used) <= 1:
        return config, ""
    note = (
        f"{dialect} runs its {len(used)} devices as Ray workers: so does rl "
        "(trainer.launcher=ray; with one device, trainer.launcher=local runs in this process)"
    )
    return apply_overrides(config, {"trainer.launcher": "ray"}), note


@contextmanager
def naming_upstream_keys(report: Report) -> Iterator[None]:
    """A user error raised inside names the upstream key beside each of ours it mentions."""
    from rl.core.errors import UserError

    try:
        yield
    except UserError as error:
        error.args = (report.name_upstream(str(error)), *error.args[1:])
        raise


REPORT_OPTION = typer.Option(
    "short",
    "--report",
    help="short: what changes training, what rl handles itself (one line per reason) and "
    "the count of mapped keys; full: every key.",
)
ALLOW_OPTION = typer.Option(
    None,
    "--allow-unsupported",
    help="Run without these upstream settings that change training and that rl cannot "
    "honour (KEY[,KEY]; shell patterns such as 'rewards.*'); they are recorded in "
    "config.yaml (trainer.dropped_settings).",
)


def report_is_full(report: str, verbose: bool = False) -> bool:
    from rl.core.config import ConfigError

    if report not in ("short", "full"):
        raise ConfigError(f"--report {report!r}: choose short or full")
    return verbose or report == "full"


def convert(
    source: Path = typer.Argument(..., help="The upstream config file (YAML) or launch script."),
    overrides: list[str] = typer.Argument(
        None,
        help="Overrides in the upstream system's syntax (verl, ROLL, RLinf: Hydra's key=v, "
        "+key=v, ~key; ChatLearn: key=v), or rl's own keys (key=v).",
    ),
    dialect: str | None = FROM_OPTION,
    out: Path | None = typer.Option(None, "-o", "--out", help="Write our YAML here."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Same as --report full."),
    report: str = REPORT_OPTION,
    allow: list[str] = ALLOW_OPTION,
) -> None:
    """Convert a verl, ROLL, ChatLearn or RLinf config to ours: prints (or writes) the
    YAML and reports the upstream keys, ranked: what changes training and rl cannot honour
    (refused unless allowed), what rl handles itself, what mapped."""
    with exit_on_error():
        from rl.core.config import dump_config

        full = report_is_full(report, verbose)

        def show(text: str) -> None:
            typer.echo(text, err=out is None)

        config, _ = convert_config(
            dialect, source, list(overrides or []), allow=allow or (), show=show, full=full
        )
        text = dump_config(config)
        if out is None:
            typer.echo(text, nl=False)
        else:
            out.write_text(text)
            typer.echo(f"wrote {out}")
