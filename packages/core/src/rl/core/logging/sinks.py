"""Metric sinks; each takes `log(metrics, step)` and `close()`."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any, Protocol

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
    """Drop rows logged after `last_step` (a killed run got past its last checkpoint), and a
    torn row (killed mid-write) with a warning: neither may block a resume."""
    path = output_dir / "metrics.jsonl"
    if not path.exists():
        return
    kept = []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            step = json.loads(line)["step"]
        except (json.JSONDecodeError, TypeError, KeyError):
            log.warning("%s, line %d: dropped a torn or foreign row: %.80s", path, number, line)
            continue
        if isinstance(step, int) and step <= last_step:
            kept.append(line)
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(line + "\n" for line in kept))
    tmp.replace(path)


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


class WandbSink:
    def __init__(self, project: str, name: str, config: dict[str, Any]) -> None:
        self.wandb = require("wandb", "rl-core[wandb]", "trainer.logger: wandb")
        self.run = self.wandb.init(project=project, name=name, config=config)

    def log(self, metrics: dict[str, float], step: int) -> None:
        self.run.log(metrics, step=step)

    def close(self) -> None:
        self.run.finish()


class MlflowSink:
    def __init__(self, project: str, name: str, config: dict[str, Any]) -> None:
        self.mlflow = require("mlflow", "rl-core[mlflow]", "trainer.logger: mlflow")
        self.mlflow.set_experiment(project)
        self.mlflow.start_run(run_name=name)
        self.mlflow.log_dict(config, "config.json")

    def log(self, metrics: dict[str, float], step: int) -> None:
        safe = {k.replace("@", "_at_"): v for k, v in metrics.items()}
        self.mlflow.log_metrics(safe, step=step)

    def close(self) -> None:
        self.mlflow.end_run()
