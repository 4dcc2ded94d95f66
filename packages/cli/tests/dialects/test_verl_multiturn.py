"""verl's multi-turn GSM8K example as its users run it: verl's own launch script, its
config and its tool config (`verl/upstream/examples/sglang_multiturn/`, verbatim), run from
a checkout laid out as verl's (its package beside its examples). It converts with nothing
refused, verl's `Gsm8kTool` built from the tool config, and trains 2 steps shrunk on a
real-shape Qwen2.5 folder with rows laid out as verl's `gsm8k_multiturn_w_tool.py` writes
them (the tool described in every prompt, the rows' tools_kwargs handed to it)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rl.cli.convert_cmd import convert_config
from rl.core.agent.verl_tools import Gsm8kAnswer

UPSTREAM = Path(__file__).parent / "verl/upstream"
SCRIPT = "examples/sglang_multiturn/run_qwen2.5-3b_gsm8k_multiturn.sh"
SYSTEM = (
    "You are a math expert. You are given a question and you need to solve it step by step. "
    "Reasoning step by step before any tool call. You should use the `calc_gsm8k_reward` "
    "tool after step by step solving the question, before generate final answer at least "
    "once and refine your answer if necessary. Put your final answer in the format of "
    "`#### <answer>`."
)


@pytest.fixture
def checkout(verl_release, tmp_path, monkeypatch):
    """verl's checkout as its scripts expect it: the package (0.9.1's) beside examples/."""
    root = tmp_path / "verl"
    root.mkdir()
    (root / "verl").symlink_to(verl_release("0.9.1") / "verl")
    shutil.copytree(UPSTREAM / "examples", root / "examples")
    monkeypatch.chdir(root)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return root


def test_verls_multiturn_example_converts_with_nothing_refused(checkout):
    config, report = convert_config("verl", checkout / SCRIPT, [])
    multi_turn = config.rollout.multi_turn
    assert multi_turn.enable and multi_turn.max_assistant_turns == 5
    assert multi_turn.tool_config_path == str(
        checkout / "examples/sglang_multiturn/config/tool_config/gsm8k_tool_config.yaml"
    )
    # verl's multi-turn defaults, which differ from rl's, carried over
    assert (multi_turn.max_parallel_calls, multi_turn.max_tool_response_length) == (1, 256)
    assert multi_turn.tool_response_truncate_side == "middle" and multi_turn.format == "hermes"
    assert [e.source for e in report.entries if e.status == "unsupported"] == []
    assert config.rollout.n == 16 and config.algorithm.adv_estimator == "grpo"


@pytest.mark.slow
def test_verls_multiturn_example_trains_two_steps(checkout, model_folder, tmp_path, shrunk):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rl.core.trainer import run_training
    from rl.core.trainer.agentic import build_tools

    config, _ = convert_config("verl", checkout / SCRIPT, [])
    assert [type(tool) for tool in build_tools(config)] == [Gsm8kAnswer]
    rows = [
        {
            "data_source": "openai/gsm8k",
            "prompt": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": f"What is {a} + {b}? Let's think step by step."},
            ],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": str(a + b)},
            "extra_info": {
                "split": "train",
                "index": a * 10 + b,
                "tools_kwargs": {
                    "calc_gsm8k_reward": {"create_kwargs": {"ground_truth": str(a + b)}}
                },
            },
        }
        for a in range(1, 5)
        for b in range(1, 3)
    ]
    data = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist(rows), data)
    tree = shrunk.tiny_cpu_run(config, data, tmp_path / "out")
    folder = model_folder("qwen2.5-0.5b", num_layers=2, hidden_size=128, intermediate_size=256)
    tree["model"].update(path=str(folder))
    tree["data"].update(chat_template="auto", max_prompt_length=1024, max_response_length=48)
    tree["rollout"]["multi_turn"].update(max_assistant_turns=2, max_tokens_per_turn=16)
    tree["actor"].pop("use_kl_loss", None)
    tree["actor"]["use_kl_loss"] = False  # no reference model to build at this size
    run_training(shrunk.build(tree))
    lines = (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()
    steps = [json.loads(line) for line in lines if '"agent/turns_mean"' in line]
    assert len(steps) == 2 and all(step["agent/turns_mean"] >= 1 for step in steps)
    # the prompts the run trained on: the chat template described verl's tool in each
    from rl.core.models.loading import load_tokenizer
    from rl.core.trainer.build import build_dataset

    small = shrunk.build(tree)
    prompts = build_dataset(small, small.data.train_files, 0, 0, load_tokenizer(small.model))
    assert len(prompts.items) == len(rows)
    for item in prompts.items:
        assert '"name": "calc_gsm8k_reward"' in item.prompt_text
        assert item.extra_info["tools_kwargs"]["calc_gsm8k_reward"]["create_kwargs"]
