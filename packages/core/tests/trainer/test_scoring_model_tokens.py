"""Agentic rows are scored on what the model wrote, not on what its tools printed."""

from rl.core.engines import Rollouts
from rl.core.trainer.scoring import model_tokens


def test_tool_turns_are_left_out_of_the_scored_text():
    rollouts = Rollouts([[1]], [[5, 6, 7, 8, 9]], [[0.0] * 5], ["stop"], [[1, 1, 0, 0, 1]])
    assert model_tokens(rollouts) == [[5, 6, 9]]
    plain = Rollouts([[1]], [[5, 6]], [[0.0] * 2])
    assert model_tokens(plain) == [[5, 6]]
