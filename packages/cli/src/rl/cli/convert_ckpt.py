"""`rl convert-ckpt --to megatron|hf SOURCE OUT`: HF folders <-> megatron distributed checkpoints."""

from __future__ import annotations

from pathlib import Path

import typer

from rl.cli.errors import exit_on_error


def convert_ckpt(
    source: Path = typer.Argument(
        ..., help="A Hugging Face folder (--to megatron) or a megatron checkpoint (--to hf)."
    ),
    out: Path = typer.Argument(..., help="The folder to write."),
    to: str = typer.Option(..., "--to", help="megatron or hf."),
) -> None:
    """Convert weights between a Hugging Face folder and a megatron-core distributed
    checkpoint (loadable at any TP/PP layout: `actor.megatron.use_dist_checkpointing`).
    A training checkpoint's actor folder converts to HF too."""
    with exit_on_error():
        from rl.core.imports import MissingDependencyError, is_installed

        if to not in ("megatron", "hf"):
            raise typer.BadParameter("--to is megatron or hf")
        if not is_installed("rl.megatron") or not is_installed("megatron.core"):
            raise MissingDependencyError(
                "rl convert-ckpt needs rl-megatron: pip install rl-megatron"
            )
        if not source.exists():
            from rl.core.config import ConfigError

            raise ConfigError(f"{source} does not exist")
        from rl.megatron.convert import dist_to_hf, hf_to_dist

        target = hf_to_dist(source, out) if to == "megatron" else dist_to_hf(source, out)
        typer.echo(f"wrote {target}")
