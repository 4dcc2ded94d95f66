"""Metric sinks; each takes `log(metrics, step)` and `close()`."""

from __future__ import annotations

import json
import logging
import math
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from rl.core.atomic_files import write_text
from rl.core.imports import require

log = logging.getLogger(__name__)


class Sink(Protocol):
    def log(self, metrics: dict[str, float], step: int) -> None: ...

    def close(self) -> None: ...


class JsonlSink:
    """One JSON object per step in `<output_dir>/metrics.jsonl` (appended on resume)."""

    def __init__(self, output_dir: Path) -> None:
        self.path = output_dir / "metrics.jsonl"
        self.handle = self.path.open("a")

    def log(self, metrics: dict[str, float], step: int) -> None:
        clean = {k: (v if math.isfinite(v) else None) for k, v in metrics.items()}
        self.handle.write(json.dumps({"step": step, **clean}) + "\n")
        self.handle.flush()

    def close(self) -> None:
        self.handle.close()


def trim_metrics_file(output_dir: Path, last_step: int) -> None:
    """Drop metrics rows logged after `last_step` (a killed run got past its last
    checkpoint), and a torn row (killed mid-write) with a warning: neither may block a
    resume."""
    trim_step_rows(output_dir / "metrics.jsonl", last_step)


def step_rows(path: Path) -> Iterator[tuple[int, str, Any]]:
    """(line number, line, its "step" or `TORN`) of each non-blank row of a per-step JSONL
    file (metrics, validation generations); none when the file is missing."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield number, line, json.loads(line)["step"]
        except (json.JSONDecodeError, TypeError, KeyError):
            yield number, line, TORN


TORN = object()  # a row killed mid-write, or not ours


def trim_step_rows(path: Path, last_step: int) -> None:
    """Keep the rows of a per-step JSONL file up to `last_step` (none for -1), atomically."""
    if not path.exists():
        return
    kept = []
    for number, line, step in step_rows(path):
        if step is TORN:
            log.warning("%s, line %d: dropped a torn or foreign row: %.80s", path, number, line)
        elif isinstance(step, int) and step <= last_step:
            kept.append(line)
    write_text(path, "".join(line + "\n" for line in kept))


class TensorBoardSink:
    def __init__(self, output_dir: Path) -> None:
        require("tensorboard", "rl-core[tensorboard]", "trainer.logger: tensorboard")
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(output_dir / "tensorboard"))

    def log(self, metrics: dict[str, float], step: int) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


# W&B, MLflow and SwanLab each restrict metric names differently (W&B's UI sorts and filters
# only names of letters, digits and `_`; MLflow rejects `@`; SwanLab a leading or trailing `/`):
# one rule for all three, so a metric has the same name in each. `/` stays: all three group
# metrics into sections by it. metrics.jsonl, the console and TensorBoard keep the names as logged.
_NOT_IN_KEY = re.compile(r"[^A-Za-z0-9_/]")


def tracker_key(name: str) -> str:
    """`name` as W&B, MLflow and SwanLab all take it: `@` -> `_at_` (`pass@4/gsm8k` ->
    `pass_at_4/gsm8k`), any other character but letters, digits, `_` and `/` -> `_`, and no
    empty, leading or trailing `/` sections."""
    key = _NOT_IN_KEY.sub("_", name.replace("@", "_at_"))
    return "/".join(part for part in key.split("/") if part) or "_"


class TrackerKeys:
    """`tracker_key` for every metric, cached, warning once when two names meet in one key."""

    def __init__(self, tracker: str) -> None:
        self.tracker = tracker
        self.keys: dict[str, str] = {}
        self.names: dict[str, str] = {}  # key -> the first name logged under it

    def __call__(self, metrics: dict[str, float]) -> dict[str, float]:
        renamed = {}
        for name, value in metrics.items():
            key = self.keys.get(name)
            if key is None:
                key = self.keys[name] = tracker_key(name)
                first = self.names.setdefault(key, name)
                if first != name:
                    log.warning(
                        "metrics %r and %r are both logged to %s as %r",
                        first,
                        name,
                        self.tracker,
                        key,
                    )
            renamed[key] = value
        return renamed


class _RunSink:
    """A tracker whose run object takes `log(metrics, step=)` and `finish()` (W&B, SwanLab);
    a subclass's __init__ starts `run` and names the tracker in `keys`."""

    run: Any
    keys: TrackerKeys

    def log(self, metrics: dict[str, float], step: int) -> None:
        self.run.log(self.keys(metrics), step=step)

    def close(self) -> None:
        self.run.finish()


class WandbSink(_RunSink):
    """A W&B run `<project>/<name>` holding the config and every step's metrics.

    The run's files go under `<output_dir>/wandb` (WANDB_DIR, if set, wins). The mode is W&B's
    own: online by default, or what WANDB_MODE (or `wandb offline`) says. WANDB_MODE=offline
    needs no network and no API key; `wandb sync <output_dir>/wandb/offline-run-*` uploads the
    run later.
    """

    def __init__(self, project: str, name: str, config: dict[str, Any], output_dir: Path) -> None:
        wandb = require("wandb", "rl-core[wandb]", "trainer.logger: wandb")
        where = {} if os.environ.get("WANDB_DIR") else {"dir": str(output_dir)}
        self.run = wandb.init(project=project, name=name, config=config, **where)
        self.keys = TrackerKeys("W&B")


class MlflowSink:
    """An MLflow run `<name>` in experiment `<project>`: every step's metrics, the config as the
    artifact `config.json` and as flattened params (`actor.optim.lr`).

    The tracking URI is MLFLOW_TRACKING_URI, else the local file store `<output_dir>/mlruns`
    (no server, no network; `MLFLOW_ALLOW_FILE_STORE=true mlflow ui --backend-store-uri
    <output_dir>/mlruns` shows it, with the full `mlflow` installed).
    Talks to its own `MlflowClient`: no process-wide active run or tracking URI is set.
    """

    def __init__(self, project: str, name: str, config: dict[str, Any], output_dir: Path) -> None:
        require("mlflow", "rl-core[mlflow]", "trainer.logger: mlflow")
        from mlflow.entities import Param
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient

        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:
            uri = (output_dir / "mlruns").resolve().as_uri()
            # MLflow >= 3.7 refuses the file store (now in maintenance mode) unless this is set;
            # a user who set it, either way, keeps their choice.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.client = MlflowClient(tracking_uri=uri)
        experiment = self.client.get_experiment_by_name(project)
        if experiment is not None:
            experiment_id = experiment.experiment_id
        else:
            try:
                experiment_id = self.client.create_experiment(project)
            except MlflowException:  # another run created it since
                experiment = self.client.get_experiment_by_name(project)
                if experiment is None:
                    raise
                experiment_id = experiment.experiment_id
        self.run_id = self.client.create_run(experiment_id, run_name=name).info.run_id
        self.client.log_dict(self.run_id, config, "config.json")
        params = [Param(key, value) for key, value in mlflow_params(config).items()]
        for start in range(0, len(params), 100):  # MLflow takes at most 100 params a call
            self.client.log_batch(self.run_id, params=params[start : start + 100])
        self.keys = TrackerKeys("MLflow")

    def log(self, metrics: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        batch = [Metric(key, float(value), now, step) for key, value in self.keys(metrics).items()]
        for start in range(0, len(batch), 1000):  # MLflow takes at most 1000 metrics a call
            self.client.log_batch(self.run_id, metrics=batch[start : start + 1000])

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


_NOT_IN_PARAM = re.compile(r"[^A-Za-z0-9_.-]")


def mlflow_params(config: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """The config flattened to MLflow params: dotted keys as in overrides (`actor.optim.lr`),
    values as text cut to MLflow's 6000 characters."""
    params = {}
    for name, value in config.items():
        key = prefix + (_NOT_IN_PARAM.sub("_", str(name)).strip(".") or "_")
        if isinstance(value, dict) and value:
            params.update(mlflow_params(value, key + "."))
        else:
            params[key] = str(value)[:6000]
    return params


_NOT_IN_PROJECT = re.compile(r"[^0-9A-Za-z_+.-]")


class SwanLabSink(_RunSink):
    """A SwanLab experiment `<name>` in project `<project>` with the config and every step's
    metrics.

    Its files go under `<output_dir>/swanlog` (SWANLAB_LOG_DIR, if set, wins). The mode is
    SwanLab's own: online (cloud) by default, or what SWANLAB_MODE says. SWANLAB_MODE=offline
    needs no network and no API key; `swanlab sync <output_dir>/swanlog/run-*` uploads it later.
    """

    def __init__(self, project: str, name: str, config: dict[str, Any], output_dir: Path) -> None:
        swanlab = require("swanlab", "rl-core[swanlab]", "trainer.logger: swanlab")
        # SwanLab project names are 1-100 of letters, digits and `_-+.`
        project = _NOT_IN_PROJECT.sub("_", project)[:100] or "rl"
        where = {} if os.environ.get("SWANLAB_LOG_DIR") else {"logdir": str(output_dir / "swanlog")}
        self.run = swanlab.init(project=project, experiment_name=name, config=config, **where)
        self.keys = TrackerKeys("SwanLab")
