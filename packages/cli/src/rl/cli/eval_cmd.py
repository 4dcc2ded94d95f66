"""`rl eval`: score generated responses offline, per data source (verl's `main_eval`), or
generate them first with a model on the validation set (`--model`, online)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from rl.cli.errors import exit_on_error


def evaluate(
    arguments: list[str] = typer.Argument(
        None,
        metavar="[SOURCE] [KEY=VALUE ...]",
        help="Offline: verl's evaluation.yaml (data.path, data.*_key, "
        "custom_reward_function.*) or the table of generated responses itself (parquet, "
        "JSON Lines), then key=value overrides (data.response_key=outputs ks=[1,4]). "
        "With --model: an optional config file of ours, then overrides of it.",
    ),
    model: Path | None = typer.Option(
        None,
        "--model",
        "-m",
        help="Online: a Hugging Face folder, a run's output folder or a checkpoint "
        "(checkpoints/global_step_N) to generate on data.val_files with rollout.val_kwargs.",
    ),
    ks: str = typer.Option("1", "--ks", help="Online: the k of pass@k, comma-separated."),
    generations: Path | None = typer.Option(
        None, "--generations", help="Online: write every response and score here (JSONL)."
    ),
    out: Path | None = typer.Option(None, "-o", "--out", help="Also write the metrics as JSON."),
    dialect: str | None = typer.Option(
        None,
        "--from",
        help="verl: SOURCE is verl's evaluation.yaml (verl's main_eval config, any release); "
        "its layout is also what rl eval reads without the option.",
    ),
) -> None:
    """Score every response of a table of generations (or, with --model, of the model's
    generations on the validation set) and report, per data source, the mean score
    (test_score/<source>) and pass@k."""
    with exit_on_error():
        items = list(arguments or [])
        if dialect is not None:
            _check_dialect(dialect, items, model)
        metrics = _online(model, items, ks, generations) if model else _offline(items)
        for key, value in metrics.items():
            typer.echo(f"{key}: {value:.4f}")
        if out is not None:
            out.write_text(json.dumps(metrics, indent=2) + "\n")


def _check_dialect(dialect: str, items: list[str], model: Path | None) -> None:
    """`--from verl`: the one system whose evaluation config rl eval reads (verl's
    main_eval); the file must be one."""
    from rl.core.config import ConfigError

    if dialect != "verl":
        raise ConfigError(
            f"rl eval --from {dialect}: only verl's evaluation.yaml (--from verl) has an "
            "evaluation config rl reads; give the table of responses itself otherwise"
        )
    if model is not None or not items or Path(items[0]).suffix.lower() not in (".yaml", ".yml"):
        raise ConfigError("rl eval --from verl needs verl's evaluation.yaml first (no --model)")


def _offline(items: list[str]) -> dict[str, float]:
    from omegaconf import OmegaConf

    from rl.core.config import ConfigError
    from rl.core.evaluation import eval_config, run_eval

    if not items or "=" in items[0]:
        raise ConfigError(
            "rl eval needs the evaluation.yaml or the table of responses (or --model PATH "
            "to generate them)"
        )
    source, overrides = Path(items[0]), items[1:]
    if source.suffix.lower() in (".yaml", ".yml"):
        if not source.is_file():
            raise ConfigError(f"{source} does not exist (an evaluation.yaml)")
        base = OmegaConf.load(source)
    else:
        base = OmegaConf.create({"data": {"path": str(source)}})
    try:
        merged = OmegaConf.merge(base, OmegaConf.from_dotlist(overrides))
        values = OmegaConf.to_container(merged, resolve=True)
    except Exception as error:  # omegaconf's errors name the key
        raise ConfigError(f"{source}: {error}") from error
    assert isinstance(values, dict)
    return run_eval(eval_config({str(k): v for k, v in values.items()}))


def _online(model: Path, items: list[str], ks: str, generations: Path | None) -> dict[str, float]:
    from rl.cli.train import config_and_overrides
    from rl.core.config import ConfigError, load_config
    from rl.core.demo import DEMO_CONFIG
    from rl.core.trainer.evaluate_model import EVAL_OVERRIDES, model_source, run_online_eval

    try:
        k_values = tuple(int(k) for k in ks.split(","))
    except ValueError:
        raise ConfigError(f"--ks {ks!r}: comma-separated positive integers, e.g. 1,4") from None
    if min(k_values) < 1:
        raise ConfigError(f"--ks {ks!r}: each k must be a positive integer")
    source = model_source(model)
    path, overrides = config_and_overrides(None, items)
    config_file = path or source.config_file or DEMO_CONFIG
    config = load_config(config_file, [*source.overrides, *EVAL_OVERRIDES, *overrides])
    return run_online_eval(config, source.actor_state, k_values, generations=generations)
