"""A run ends its reward worker processes itself, whether it finishes or stops on a
reward error: a pool left to the interpreter's exit races CPython 3.11's exit hooks (the
pool's manager thread closes its wake-up pipe while the hook writes to it) and prints a
"Bad file descriptor" traceback after the run's last line."""

from __future__ import annotations

import multiprocessing

import pytest

from rl.core.config import load_config
from rl.core.demo import DEMO_CONFIG
from rl.core.errors import RewardError
from rl.core.trainer import run_training


def _reward_workers() -> list[multiprocessing.process.BaseProcess]:
    return [p for p in multiprocessing.active_children() if p.is_alive()]


@pytest.mark.parametrize("body", ["return 1.0", "raise ValueError('boom')"])
def test_the_run_ends_its_reward_workers(tmp_path, one_tiny_step, body):
    scorer = tmp_path / "scorer.py"
    scorer.write_text(
        "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
        f"    {body}\n"
    )
    config = load_config(
        DEMO_CONFIG,
        [
            *one_tiny_step,
            "reward.num_workers=1",
            f"reward.custom_reward_function.path={scorer}",
            f"trainer.output_dir={tmp_path / 'out'}",
        ],
    )
    assert _reward_workers() == []
    if body.startswith("raise"):
        with pytest.raises(RewardError, match="boom"):
            run_training(config)
    else:
        run_training(config)
    assert _reward_workers() == []
