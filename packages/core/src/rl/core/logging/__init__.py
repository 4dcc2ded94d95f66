"""Where metrics go: console, JSONL, TensorBoard, W&B, MLflow, and a PNG at the end."""

from rl.core.logging.tracker import Tracker, make_tracker

__all__ = ["Tracker", "make_tracker"]
