"""The agent loop on a real rollout engine (Hugging Face generation, a tiny random Qwen2):
an environment episode of several turns interleaves the model's samples with observation
turns, and the log-probs the engine returned for the model's tokens equal a teacher-forced
forward over the finished trajectory — so each turn continued exactly the token ids of the
trajectory so far (token in / token out), and the loss mask marks exactly those tokens."""

from __future__ import annotations

import asyncio
import importlib.util
import string
from pathlib import Path

import torch

from rl.core.agent.environment import EnvStep
from rl.core.agent.loop import AgentLimits, AgentLoop
from rl.core.config.schema import TinyModelConfig
from rl.core.engines import SamplingParams
from rl.core.models.tiny import tiny_qwen2_config
from rl.rollout.hf import HFRolloutEngine

_CONFTEST = Path(__file__).resolve().parents[2] / "core" / "tests" / "agent" / "conftest.py"


def _tokenizer():
    spec = importlib.util.spec_from_file_location("agent_conftest", _CONFTEST)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.printable_tokenizer()


class Chatter:
    """Never done: each episode runs to max_turns, observation turns in between."""

    def reset(self, task):
        return f"say something about {task}"

    def step(self, action):
        return EnvStep(f"you said {len(action)} characters, go on", 0.0, False)


def test_an_episode_on_hf_generation_is_token_in_token_out():
    from transformers import Qwen2ForCausalLM

    tokenizer = _tokenizer()
    torch.manual_seed(0)
    config = tiny_qwen2_config(
        TinyModelConfig(), len(tokenizer), tokenizer.pad_token_id, tokenizer.eos_token_id
    )
    model = Qwen2ForCausalLM(config).eval()
    engine = HFRolloutEngine(model, tokenizer)
    # turns end at any digit or letter: short turns, rarely cut by their budget
    stops = tuple(tokenizer.convert_tokens_to_ids(list(string.digits + string.ascii_letters)))
    sampling = SamplingParams(temperature=1.0, stop_token_ids=stops, seed=3)
    loop = AgentLoop(engine, tokenizer, limits=AgentLimits(max_turns=4, max_tokens_per_turn=40))
    trajectories = asyncio.run(
        loop.run_many([[], []], sampling, environments=[Chatter(), Chatter()], tasks=["a", "b"])
    )
    for trajectory in trajectories:
        mask = trajectory.loss_mask
        assert trajectory.turns == 4 and trajectory.truncated  # max_turns, turns interleaved
        ids = torch.tensor([trajectory.ids])
        with torch.no_grad():
            logits = model(ids).logits[0].float()
        start = len(trajectory.prompt_ids)
        forced = torch.log_softmax(logits[start - 1 : -1] / sampling.temperature, dim=-1)
        forced = forced.gather(1, ids[0, start:, None])[:, 0]
        model_positions = torch.tensor(mask, dtype=torch.bool)
        returned = torch.tensor(trajectory.logprobs)
        torch.testing.assert_close(
            returned[model_positions], forced[model_positions], atol=2e-5, rtol=1e-5
        )
        assert (returned[~model_positions] == 0).all()
