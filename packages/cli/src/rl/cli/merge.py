"""`rl merge CKPT OUT`: a checkpoint's weights as a Hugging Face folder."""

from __future__ import annotations

from pathlib import Path

import typer

from rl.cli.errors import exit_on_error


def merge(
    checkpoint: Path = typer.Argument(
        ..., help="A checkpoint folder (…/checkpoints/global_step_N) or a run's output folder."
    ),
    out: Path = typer.Argument(..., help="The Hugging Face folder to write."),
    role: str = typer.Option("actor", "--role", help="actor, critic or ref."),
) -> None:
    """Write a checkpoint's model (any world size wrote it) as a Hugging Face folder."""
    with exit_on_error():
        from rl.core.trainer.merge import merge_checkpoint

        target = merge_checkpoint(checkpoint, out, role)
        typer.echo(f"wrote {target}")
