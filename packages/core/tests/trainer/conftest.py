"""Shared by the trainer-level tests that train one step of the embedded demo."""

import pytest


@pytest.fixture
def one_tiny_step() -> list[str]:
    """Overrides of the demo config for one RL step at the smallest useful size: 4 prompts
    x 2 responses of at most 3 tokens, no validation, no SFT warm start."""
    return [
        "data.builtin_train_size=16",
        "data.builtin_val_size=4",
        "data.train_batch_size=4",
        "data.max_response_length=3",
        "actor.ppo_mini_batch_size=4",
        "rollout.n=2",
        "trainer.total_training_steps=1",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        "trainer.progress_bar=false",
        "sft.steps=0",
    ]
