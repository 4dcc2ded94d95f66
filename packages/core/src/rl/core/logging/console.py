"""The console: a rich progress bar with ETA and one line of key metrics per step."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

KEY_METRICS = (
    ("reward/mean", "reward"),
    ("val/accuracy", "val_acc"),
    ("actor/pg_loss", "pg_loss"),
    ("actor/entropy", "entropy"),
    ("actor/approx_kl", "kl"),
    ("critic/vf_loss", "vf_loss"),
    ("response/length_mean", "len"),
    ("timing/step", "s/step"),
)


def format_step_line(step: int, metrics: dict[str, float]) -> str:
    parts = [f"step {step}"]
    parts += [f"{label} {metrics[key]:.4g}" for key, label in KEY_METRICS if key in metrics]
    return "  ".join(parts)


class ConsoleSink:
    def __init__(self, total_steps: int, progress_bar: bool = True) -> None:
        self.console = Console()
        self.progress: Progress | None = None
        if progress_bar:
            self.progress = Progress(
                TextColumn("[bold]training"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                console=self.console,
                transient=True,
            )
            self.task = self.progress.add_task("train", total=total_steps)
            self.progress.start()

    def log(self, metrics: dict[str, float], step: int) -> None:
        self.console.print(format_step_line(step, metrics), highlight=False)
        if self.progress is not None:
            self.progress.update(self.task, completed=step)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
