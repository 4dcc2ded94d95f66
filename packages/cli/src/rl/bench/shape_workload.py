"""The real-shape workload of `rl.bench grpo-step --shape NAME --layers N`.

One model folder shaped like a released model (`rl.core.models.build_model_folder`: the
full vocabulary and tokenizer with its chat template, tied embeddings where the release
ties them, random weights from the workload's seed, `N` decoder layers), built once per
benchmark run, and GSM8K rows in verl's layout (`rl.core.data.verl_layout.gsm8k_rows`:
chat messages, `reward_model.ground_truth`), written once as parquet for our side and
handed to TRL as conversational prompts. Both sides render the prompts with the folder's
chat template (`prompt_ids` checks the token ids agree) and score with verl's GSM8K rule
(`rl.core.rewards.gsm8k_rule.gsm8k`). 8 prompts x 4 samples x at most 32 response tokens,
fp32, one optimizer step per RL step at the tiny workload's learning rate.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from rl.bench import workload as w

SHAPES = ("qwen2.5-0.5b", "qwen3-0.6b", "llama-3.2-1b", "qwen2.5-1.5b")
MAX_RESPONSE_TOKENS = 32
MAX_PROMPT_TOKENS = 512
ENGINES = ("hf", "vllm")


@dataclass(frozen=True)
class ShapeRun:
    """What a child needs to run the real-shape workload (passed on its command line)."""

    shape: str
    layers: int
    folder: Path  # holds model/ and gsm8k/train.parquet
    engine: str = "hf"  # our rollout engine
    fused: str = "auto"  # our actor.use_fused_kernels: auto (the config's default), on, off

    @property
    def model(self) -> Path:
        return self.folder / "model"

    @property
    def train_file(self) -> Path:
        return self.folder / "gsm8k" / "train.parquet"

    def args(self) -> list[str]:
        return [
            "--shape", self.shape, "--layers", str(self.layers), "--workdir", str(self.folder),
            "--engine", self.engine, "--fused", self.fused,
        ]  # fmt: skip


def rows(steps: int) -> list[dict[str, Any]]:
    """`steps` batches of GSM8K rows (the same rows on both sides)."""
    from rl.core.data.verl_layout import gsm8k_rows

    return gsm8k_rows(steps * w.PROMPTS, "train", seed=w.SEED)


def prepare(folder: Path, shape: str, layers: int, steps: int) -> list[dict[str, Any]]:
    """Build `folder`/model (once) and write `folder`/gsm8k/train.parquet; the rows."""
    from rl.core.data.verl_layout import write_parquet
    from rl.core.models import build_model_folder

    run = ShapeRun(shape, layers, folder)
    if not (run.model / "config.json").is_file():
        build_model_folder(shape, run.model, num_layers=layers, seed=w.SEED)
    data = rows(steps)
    write_parquet(data, run.train_file)
    return data


def our_overrides(run: ShapeRun) -> list[str]:
    """`rl train` keys that put our side on the folder, the parquet and the engine."""
    keys = [
        f"model.path={run.model}",
        f"data.train_files=[{run.train_file}]",
        f"data.val_files=[{run.train_file}]",
        "data.prompt_key=prompt",
        "data.answer_key=reward_model.ground_truth",
        "data.chat_template=auto",
        f"data.max_prompt_length={MAX_PROMPT_TOKENS}",
        f"data.max_response_length={MAX_RESPONSE_TOKENS}",
        "model.dtype=float32",
        f"rollout.name={run.engine}",
    ]
    if run.fused != "auto":
        keys.append(f"actor.use_fused_kernels={'true' if run.fused == 'on' else 'false'}")
    return keys


def trl_dataset_rows(data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """TRL's conversational layout: `prompt` (the messages) and the reward's column."""
    return [
        {"prompt": r["prompt"], "ground_truth": r["reward_model"]["ground_truth"]} for r in data
    ]


def gsm8k_reward(completions: list[Any], ground_truth: list[str], **_: Any) -> list[float]:
    """TRL's reward function: verl's GSM8K rule on the assistant message's text."""
    from rl.core.rewards.gsm8k_rule import gsm8k

    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    return [gsm8k(text, truth) for text, truth in zip(texts, ground_truth, strict=True)]


def our_prompt_ids(config: Any) -> list[list[int]]:
    """The prompt token ids our trainer feeds the rollout: its own tokenizer and dataset
    builders (`rl.core.trainer.build`) on `config`'s training files."""
    from rl.core.models import load_tokenizer
    from rl.core.trainer.build import build_dataset

    data = config.data
    tokenizer = load_tokenizer(config.model)
    dataset = build_dataset(config, data.train_files, data.builtin_train_size, data.seed, tokenizer)
    return [list(item.prompt_ids) for item in dataset.items]


def trl_prompt_ids(model: Path, data: list[dict[str, Any]]) -> list[list[int]]:
    """The ids TRL's GRPOTrainer generates from: its own `_tokenize_prompts`, run on the
    attributes it reads (no trainer, no model loaded)."""
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    trainer = SimpleNamespace(
        processing_class=AutoTokenizer.from_pretrained(str(model)),
        chat_template=None,
        chat_template_kwargs={},
        tools=None,
        environment_factories=None,
        _is_vlm=False,
    )
    prompts = [row["prompt"] for row in trl_dataset_rows(data)]
    ids, _, _ = GRPOTrainer._tokenize_prompts(trainer, prompts)
    return [list(map(int, row)) for row in ids]


def mean_length(ids: list[list[int]]) -> float:
    return statistics.fmean(len(row) for row in ids)
