"""verl's generative reward model: a real model served by rl's HF engine behind the
OpenAI-compatible endpoint, prompted by a custom function written as verl's reward loop
documents one (aiohttp to `reward_router_address`, OpenAI's response type, the reward
model's tokenizer). The served model's answer is known (`judge_folder`: it says "7" and
stops), so every score is checked; in the trainer's process, in a pool of scoring
processes and in Ray actors of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl.core.config import load_config
from rl.core.errors import ConfigError
from rl.core.models.loading import load_tokenizer
from rl.core.rewards.types import RewardRequest
from rl.core.trainer.build import build_reward
from rl.core.workers.reward_model_server import GenerativeRewardModel

FUNCTIONS = Path(__file__).parent / "genrm" / "genrm_reward.py"


@pytest.fixture(scope="module")
def seven(judge_folder):
    return judge_folder("7", then_stop=True)


def config(model, *extra, name="compute_score"):
    return load_config(
        None,
        [
            f"reward.reward_model.path={model}",
            "reward.reward_model.rollout.name=hf",
            "reward.reward_model.rollout.max_model_len=512",
            f"reward.custom_reward_function.path={FUNCTIONS}",
            f"reward.custom_reward_function.name={name}",
            "reward.timeout_s=120",
            *extra,
        ],
    )


def requests(count):
    return [
        RewardRequest("gsm8k", f"It is {i}.", "4", {"question": f"What is {i}+2?"})
        for i in range(count)
    ]


def scored(run, count=4):
    reward = build_reward(run, load_tokenizer(run.model))
    try:
        assert isinstance(reward, GenerativeRewardModel)
        return reward.score(requests(count))
    finally:
        reward.close()


@pytest.mark.parametrize("workers", [0, 1])
def test_the_served_model_scores_through_the_function(seven, monkeypatch, workers):
    monkeypatch.setenv("GENRM_MODEL", str(seven))
    result = scored(config(seven, f"reward.num_workers={workers}"))
    assert result.scores == [7.0] * 4
    assert result.errors == [""] * 4
    assert result.metrics["reward/reward_model_requests"] == 4
    assert result.metrics["reward/acc"] == 0.0
    # the function was handed the reward model's tokenizer: Qwen2.5's, whose count of the
    # judge's prompt is what the chat endpoint's usage would say less its chat framing
    tokens = load_tokenizer(load_config(None, [f"model.path={seven}"]).model)
    prompt = "Problem:\nWhat is 0+2?\n\nSolution:\nIt is 0.\n\nScore the solution"
    assert result.extras[0]["prompt_tokens"] > len(tokens(prompt)["input_ids"])


def test_the_model_on_ray_actors_of_its_own(seven, monkeypatch, ray_stopped_after):
    monkeypatch.setenv("GENRM_MODEL", str(seven))
    run = config(
        seven,
        "reward.reward_model.enable_resource_pool=true",
        "reward.reward_model.n_gpus_per_node=2",
        "reward.reward_model.nnodes=1",
        "trainer.device=cpu",
    )
    reward = build_reward(run, load_tokenizer(run.model))
    try:
        assert len(reward.served.model.actors) == 2
        assert reward.score(requests(6)).scores == [7.0] * 6
    finally:
        reward.close()
    assert reward.served.model.actors == []


def test_a_model_name_the_endpoint_does_not_serve_fails_each_sample_by_name(seven, monkeypatch):
    monkeypatch.setenv("GENRM_MODEL", "gpt-4o")
    result = scored(config(seven, "reward.max_error_rate=1.0"), count=2)
    assert result.scores == [0.0, 0.0]
    assert result.metrics["reward/errors"] == 2


def test_a_function_over_its_time_is_a_timeout(seven):
    run = config(seven, "reward.timeout_s=0.5", "reward.max_error_rate=1.0", name="slow_score")
    result = scored(run, count=3)
    assert result.metrics["reward/timeouts"] == 3
    assert all("timed out after 0.5 s" in error for error in result.errors)


def test_settings_that_cannot_hold_are_refused_by_name(seven):
    with pytest.raises(ConfigError, match="reward.reward_model.rollout.name"):
        load_config(None, ["reward.reward_model.rollout.name=hf"])
    with pytest.raises(ConfigError, match="enable_resource_pool"):
        load_config(None, ["reward.reward_model.enable_resource_pool=true"])
    with pytest.raises(ConfigError, match="reward.domains"):
        load_config(
            None,
            [
                f"reward.reward_model.path={seven}",
                "reward.reward_model.rollout.name=hf",
                "reward.domains.math.scorer=data_source",
            ],
        )
    # a function that cannot take what verl's reward loop passes it
    with pytest.raises(ConfigError, match="reward_router_address"):
        build_reward(config(seven, name="plain_score"), None)
