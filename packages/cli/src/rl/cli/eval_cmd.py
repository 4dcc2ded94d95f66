"""`rl eval`: score generated responses offline, per data source (verl's `main_eval`)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from rl.cli.errors import exit_on_error


def evaluate(
    source: Path = typer.Argument(
        ...,
        help="verl's evaluation.yaml (data.path, data.*_key, custom_reward_function.*) or "
        "the table of generated responses itself (parquet, JSON Lines).",
    ),
    overrides: list[str] = typer.Argument(
        None, help="key=value overrides, e.g. data.response_key=outputs ks=[1,4]."
    ),
    out: Path | None = typer.Option(None, "-o", "--out", help="Also write the metrics as JSON."),
) -> None:
    """Score every response of a table of generations and report, per data source, the
    mean score (test_score/<source>) and pass@k."""
    with exit_on_error():
        from omegaconf import OmegaConf

        from rl.core.config import ConfigError
        from rl.core.evaluation import eval_config, run_eval

        if source.suffix.lower() in (".yaml", ".yml"):
            if not source.is_file():
                raise ConfigError(f"{source} does not exist (an evaluation.yaml)")
            base = OmegaConf.load(source)
        else:
            base = OmegaConf.create({"data": {"path": str(source)}})
        try:
            merged = OmegaConf.merge(base, OmegaConf.from_dotlist(list(overrides or [])))
            values = OmegaConf.to_container(merged, resolve=True)
        except Exception as error:  # omegaconf's errors name the key
            raise ConfigError(f"{source}: {error}") from error
        assert isinstance(values, dict)
        metrics = run_eval(eval_config({str(k): v for k, v in values.items()}))
        for key, value in metrics.items():
            typer.echo(f"{key}: {value:.4f}")
        if out is not None:
            out.write_text(json.dumps(metrics, indent=2) + "\n")
