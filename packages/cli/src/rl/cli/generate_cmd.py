"""`rl generate --from verl generation.yaml [KEY=VALUE ...]`: verl's `main_generation` job:
`data.n_samples` responses to every prompt of `data.path`, written to `data.output_path` as
the input table with a `responses` column (a list of strings per row)."""

from __future__ import annotations

from pathlib import Path

import typer

from rl.cli.convert_cmd import FROM_OPTION
from rl.cli.errors import exit_on_error


def generate(
    arguments: list[str] = typer.Argument(
        None,
        metavar="GENERATION.yaml [KEY=VALUE ...]",
        help="verl's generation.yaml (data.path, data.n_samples, data.output_path, "
        "model.path, rollout.*), then overrides in verl's syntax or rl's own keys.",
    ),
    dialect: str | None = FROM_OPTION,
    allow: list[str] = typer.Option(
        None, "--allow-unsupported", help="Run without these refused upstream settings."
    ),
) -> None:
    """Generate data.n_samples responses to every prompt of a table with a model, as verl's
    main_generation: the input rows and a `responses` column go to data.output_path."""
    with exit_on_error():
        written, rows, n = _generate(dialect, list(arguments or []), list(allow or []))
        typer.echo(f"wrote {rows} rows x {n} responses to {written}")


def _generate(dialect: str | None, items: list[str], allow: list[str]) -> tuple[Path, int, int]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rl.cli.convert_cmd import convert_config
    from rl.core.config import ConfigError
    from rl.core.config.paths import user_path
    from rl.core.data import read_rows
    from rl.core.trainer.generate_responses import run_generation

    if not items or "=" in items[0]:
        raise ConfigError("rl generate needs verl's generation.yaml first")
    path = Path(items[0])
    config, report = convert_config(
        dialect or "verl",
        path,
        items[1:],
        job="generate",
        allow=allow,
        show=lambda text: typer.echo(text, err=True),
    )
    output = next((e.value for e in report.entries if e.source == "data.output_path"), None)
    if not output:
        raise ConfigError(f"{path}: data.output_path is not set (where the table goes)")
    prompts, responses = run_generation(config)
    files = [str(user_path(name)) for name in config.data.val_files]
    source = [row.data for row in read_rows(files)]
    if len(source) != len(prompts):
        raise ConfigError(
            f"{len(source)} rows in {', '.join(files)} but {len(prompts)} prompts were "
            "generated for (data.filter_overlong_prompts dropped some): keep every row"
        )
    table = [{**row, "responses": texts} for row, texts in zip(source, responses, strict=True)]
    written = user_path(str(output))
    written.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(table), written)
    return written, len(table), config.rollout.val_kwargs.n
