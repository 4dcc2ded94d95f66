"""Fixtures of the dialect tests: `shrunk`, a converted upstream config shrunk to a 2-step
run of the built-in tiny model on the CPU in one process (the upstream job's own keys
stay, its scale and placement go). A fixture, not a module the tests import: a test module
imported as part of a package makes Ray's workers look for that package."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rl.core.config import Config
from rl.core.config.convert import from_dict, to_dict


@pytest.fixture
def shrunk():
    """`shrunk.tiny_cpu_run(config, data, output, **data_keys)` -> the tree to edit;
    `shrunk.build(tree)` -> its Config."""
    return SimpleNamespace(tiny_cpu_run=tiny_cpu_run, build=build)


def tiny_cpu_run(config: Config, data: Path, output: Path, **data_keys: Any) -> dict[str, Any]:
    """`config` as a tree: the tiny model, 4 prompts x 2 samples of `data` a step (prompts
    of 16 tokens, responses of 4), the HF rollout, 2 steps into `output`, no validation or
    checkpoints; `data_keys` update the data section. Edit it, then `build` it."""
    tree = to_dict(config)
    tree.pop("cluster")
    actor = tree["actor"]
    actor.pop("fsdp_config", None)
    actor.update(
        ulysses_sequence_parallel_size=1,
        use_dynamic_bsz=False,
        ppo_mini_batch_size=4,
        ppo_micro_batch_size_per_gpu=4,
    )
    tree["rollout"].update(
        name="hf", tensor_parallel_size=1, n=2, max_model_len=None, log_prob_use_dynamic_bsz=False
    )
    tree["rollout"].pop("engine_kwargs", None)
    tree["model"].update(path="builtin:tiny-qwen2", dtype="float32", gradient_checkpointing=False)
    tree["data"].update(
        train_files=[str(data)],
        val_files=[str(data)],
        max_prompt_length=16,
        max_response_length=4,
        train_batch_size=4,
        chat_template="none",
        truncation="error",
        **data_keys,
    )
    tree["sft"] = {"enable": False}
    tree["trainer"].update(
        device="cpu",
        launcher="local",  # the upstream job's devices became one process here
        output_dir=str(output),
        total_training_steps=2,
        logger=["jsonl"],
        progress_bar=False,
        val_before_train=False,
        test_freq=-1,
        save_freq=-1,
        resume_mode="disable",
        resume_from_path=None,
        dropped_settings={},
    )
    return tree


def build(tree: dict[str, Any]) -> Config:
    return from_dict(Config, tree)
