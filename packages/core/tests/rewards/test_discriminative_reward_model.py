"""A discriminative reward model as verl's reward loop serves it: a real-shape Qwen2.5
sequence classifier (its full tokenizer and chat template, random weights) scoring each
response through its own chat template, in the trainer's process and on two Ray actors of
its own (`enable_resource_pool`); the folder is the root conftest's `classifier_folder`.
Every score is checked against transformers' classifier
run on verl's rendering of that one text, alone (no batch, no padding)."""

from __future__ import annotations

import pytest
import torch

from rl.core.config import load_config
from rl.core.models.loading import load_tokenizer
from rl.core.rewards.model_scorer import RewardModelScorer
from rl.core.rewards.types import RewardRequest
from rl.core.trainer.build import build_reward

CHATS = [
    [{"role": "user", "content": "What is 2+2?"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Capital of France?"}],
]
ANSWERS = ["It is 4.", "Paris.", "5", "Lyon, I think, or maybe Paris."]


def requests(tokenizer):
    found = []
    for i, answer in enumerate(ANSWERS):
        chat = CHATS[i % 2]
        prompt = tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
        found.append(RewardRequest("x", answer, None, prompt_str=prompt, chat=chat))
    return found


def reference(folder, tokenizer, request):
    """transformers' classifier on verl's rendering of the chat and the response."""
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(folder, dtype=torch.float32)
    chat = [*request.chat, {"role": "assistant", "content": request.solution_str}]
    text = tokenizer.apply_chat_template(chat, add_generation_prompt=False, tokenize=False)
    with torch.no_grad():
        return model(**tokenizer(text, return_tensors="pt")).logits[0, -1].item()


def scores(folder, *overrides):
    run = load_config(None, [f"reward.reward_model.path={folder}", *overrides])
    reward = build_reward(run, load_tokenizer(run.model))
    try:
        assert isinstance(reward, RewardModelScorer)
        return reward.score(requests(reward.tokenizer)).scores, reward
    finally:
        reward.close()


@pytest.mark.parametrize(
    "placement",
    [
        [],
        ["reward.reward_model.rollout.name=hf", "reward.reward_model.batch_size=3"],
        [
            "reward.reward_model.enable_resource_pool=true",
            "reward.reward_model.n_gpus_per_node=2",
            "reward.reward_model.nnodes=1",
        ],
    ],
    ids=["in-process", "hf-batches-of-3", "two-ray-actors"],
)
def test_each_score_is_the_classifier_s_logit_on_verl_s_rendering(
    classifier_folder, placement, ray_stopped_after
):
    tokenizer = load_tokenizer(load_config(None, [f"model.path={classifier_folder}"]).model)
    found, reward = scores(classifier_folder, *placement)
    expected = [reference(classifier_folder, tokenizer, r) for r in requests(tokenizer)]
    assert found == pytest.approx(expected, abs=1e-5)
    assert len(set(found)) == len(found)  # four different texts, four different scores
    if placement and "enable_resource_pool" in placement[0]:
        assert reward.classify.actors == []  # closed with the reward


def test_an_engine_that_cannot_classify_is_refused_by_name(classifier_folder):
    from rl.core.errors import ConfigError

    with pytest.raises(ConfigError, match="reward.reward_model.rollout.name"):
        scores(classifier_folder, "reward.reward_model.rollout.name=nonesuch")
