"""The PNG summary at the end of a run: reward, validation and key metrics over steps."""

from __future__ import annotations

import json
from pathlib import Path

PLOTTED = (
    "reward/mean",
    "val/accuracy",
    "actor/pg_loss",
    "actor/entropy",
    "response/length_mean",
    "actor/grad_norm",
)


def plot_metrics(metrics_file: Path, png: Path) -> Path | None:
    """Draw the `PLOTTED` series found in `metrics_file` (JSONL) into `png`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [json.loads(line) for line in metrics_file.read_text().splitlines() if line.strip()]
    series = {key: [(r["step"], r[key]) for r in rows if r.get(key) is not None] for key in PLOTTED}
    series = {key: points for key, points in series.items() if points}
    if not series:
        return None
    figure, axes = plt.subplots(len(series), 1, figsize=(7, 2.2 * len(series)), squeeze=False)
    for axis, (key, points) in zip(axes[:, 0], series.items(), strict=True):
        steps, values = zip(*points, strict=True)
        axis.plot(steps, values, marker="o" if len(points) < 30 else None)
        axis.set_ylabel(key, fontsize=8)
        axis.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("step")
    figure.tight_layout()
    figure.savefig(png, dpi=100)
    plt.close(figure)
    return png
