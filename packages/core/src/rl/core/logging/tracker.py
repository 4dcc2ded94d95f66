"""`Tracker`: fans metrics out to the sinks named in `trainer.logger`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rl.core.config import Config, to_dict
from rl.core.logging.console import ConsoleSink
from rl.core.logging.plot import plot_metrics
from rl.core.logging.sinks import (
    JsonlSink,
    MlflowSink,
    Sink,
    SwanLabSink,
    TensorBoardSink,
    WandbSink,
)

# trainer.logger names of the experiment trackers: a run `experiment_name` in `project_name`
# with the resolved config, its files under output_dir
RUN_TRACKERS: dict[str, Callable[[str, str, dict[str, Any], Path], Sink]] = {
    "wandb": WandbSink,
    "mlflow": MlflowSink,
    "swanlab": SwanLabSink,
}


class Tracker:
    def __init__(self, sinks: list[Sink], output_dir: Path) -> None:
        self.sinks, self.output_dir = sinks, output_dir

    def log(self, metrics: dict[str, float], step: int) -> None:
        for sink in self.sinks:
            sink.log(metrics, step)

    def log_generations(self, samples: list[dict[str, Any]], step: int) -> None:
        """Validation samples (prompt, response, ground truth, score) as a JSONL table."""
        if not samples:
            return
        with (self.output_dir / "val_generations.jsonl").open("a") as handle:
            for sample in samples:
                handle.write(json.dumps({"step": step, **sample}) + "\n")

    def close(self) -> Path | None:
        for sink in self.sinks:
            sink.close()
        metrics_file = self.output_dir / "metrics.jsonl"
        if metrics_file.exists():
            return plot_metrics(metrics_file, self.output_dir / "metrics.png")
        return None


def make_tracker(config: Config, output_dir: Path, total_steps: int) -> Tracker:
    trainer = config.trainer
    # metrics.jsonl is always written: the PNG summary and resumed runs read it.
    sinks: list[Sink] = [JsonlSink(output_dir)]
    for name in trainer.logger:
        if name == "console":
            sinks.append(ConsoleSink(total_steps, trainer.progress_bar))
        elif name == "tensorboard":
            sinks.append(TensorBoardSink(output_dir))
        elif name in RUN_TRACKERS:
            run = RUN_TRACKERS[name]
            sinks.append(
                run(trainer.project_name, trainer.experiment_name, to_dict(config), output_dir)
            )
    return Tracker(sinks, output_dir)
