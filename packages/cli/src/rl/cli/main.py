"""The `rl` command: one typer app, one module per sub-command."""

from __future__ import annotations

import contextlib
import faulthandler
import logging
import sys

import typer

from rl.cli import convert_ckpt, convert_cmd, doctor, eval_cmd, generate_cmd, merge, plan_cmd, train
from rl.cli.config_cmd import config_app

app = typer.Typer(
    name="rl",
    help="Reinforcement-learning post-training of language models (PPO, GRPO and relatives).",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)


def _print_versions(value: bool) -> None:
    if not value:
        return
    from rl.core.doctor import rl_packages

    for name, version in rl_packages().items():
        typer.echo(f"{name} {version}")
    raise typer.Exit()


@app.callback()
def root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_versions,
        is_eager=True,
        help="List every installed rl-* package and its version.",
    ),
) -> None:
    """rl: train language models with reinforcement learning."""
    _say_what_rl_logs()


class CurrentStderr(logging.Handler):
    """One plain line on whatever `sys.stderr` is when a record is logged."""

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(ValueError):  # a closed stream (a test runner's)
            sys.stderr.write(self.format(record) + "\n")


def _say_what_rl_logs() -> None:
    """rl's own notes (INFO: e.g. which sandbox boundary is in force) and warnings on
    stderr, one plain line each; other libraries' loggers stay as they are."""
    logger = logging.getLogger("rl")
    if not any(isinstance(h, CurrentStderr) for h in logger.handlers):
        logger.addHandler(CurrentStderr())
        logger.setLevel(logging.INFO)


app.command("doctor")(doctor.doctor)
app.command("train")(train.train)
app.command("sft")(train.sft)
app.command("plan")(plan_cmd.plan)
app.command("merge")(merge.merge)
app.command("convert-ckpt")(convert_ckpt.convert_ckpt)
app.command("eval")(eval_cmd.evaluate)
app.command("generate")(generate_cmd.generate)
app.command("convert")(convert_cmd.convert)
app.add_typer(config_app, name="config")


def main() -> None:
    # a crash in native code (SIGSEGV, SIGABRT) prints every thread's Python stack on
    # stderr, so the run's log names where it died instead of only an exit code
    faulthandler.enable()
    app()
