import shutil
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def rl_executable():
    """The `rl` script of the interpreter running the tests, else the one on PATH."""
    beside = Path(sys.executable).with_name("rl")
    found = str(beside) if beside.exists() else shutil.which("rl")
    if found is None:
        pytest.fail("the `rl` console script is not installed: pip install -e packages/cli")
    return found


@pytest.fixture(scope="session")
def tiny_run():
    """Overrides for a few-second run of the whole loop on the tiny model."""
    return TINY_RUN


TINY_RUN = [
    "data.builtin_train_size=64",
    "data.builtin_val_size=8",
    "data.train_batch_size=8",
    "data.max_response_length=3",
    "actor.ppo_mini_batch_size=4",
    "rollout.n=2",
    "trainer.total_training_steps=3",
    "trainer.test_freq=2",
    "trainer.progress_bar=false",
    "sft.steps=5",
]
