import torch

from rl.core.engines import Rollouts
from rl.core.trainer.rollout_batch import build_batch, scores_to_token_level


def test_layout_left_padded_prompts_right_padded_responses():
    rollouts = Rollouts([[5, 6, 7], [8]], [[1, 2], [3, 4, 9]], [[-0.5, -0.25], [-1.0, -2.0, -3.0]])
    batch = build_batch(rollouts, pad_token_id=0, response_width=4)
    assert batch["prompts"].tolist() == [[5, 6, 7], [0, 0, 8]]
    assert batch["responses"].tolist() == [[1, 2, 0, 0], [3, 4, 9, 0]]
    assert batch["input_ids"].tolist() == [[5, 6, 7, 1, 2, 0, 0], [0, 0, 8, 3, 4, 9, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 1, 0]]
    assert batch["position_ids"].tolist() == [[0, 1, 2, 3, 4, 4, 4], [0, 0, 0, 1, 2, 3, 3]]
    assert batch["response_mask"].tolist() == [[1, 1, 0, 0], [1, 1, 1, 0]]
    assert batch["rollout_logprobs"].tolist() == [[-0.5, -0.25, 0, 0], [-1, -2, -3, 0]]
    longs = ("prompts", "responses", "input_ids", "attention_mask", "position_ids")
    assert all(batch[key].dtype == torch.long for key in longs)
    assert batch["response_mask"].dtype == batch["rollout_logprobs"].dtype == torch.float32


def test_outcome_score_sits_on_the_last_response_token():
    mask = torch.tensor([[1.0, 1, 0], [1, 1, 1], [0, 0, 0]])
    assert scores_to_token_level([2.0, -1.0, 5.0], mask).tolist() == [
        [0, 2, 0],
        [0, 0, -1],
        [0, 0, 0],
    ]
