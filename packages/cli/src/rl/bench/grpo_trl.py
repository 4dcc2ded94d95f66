"""TRL's side of `rl.bench grpo-step`: `trl.GRPOTrainer` on the same workload.

The same model (the demo's tiny Qwen2 with the same seeded weights, saved to a folder so
that TRL builds its reference model from it as it would from a hub name), the same
tokenizer, prompts and reward. TRL counts `per_device_train_batch_size` in completions;
one generation per optimizer step (`steps_per_generation` 1, `num_iterations` 1), so its
old log-probs are the training forward's, as ours are on-policy.
At a real shape (`--shape`) it trains the benchmark's folder on the GSM8K rows as
conversational prompts (`rl.bench.shape_workload`), its generation from the trainer's own
defaults (TRL sets top-p 1, top-k off and no repetition penalty itself).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from rl.bench import shape_workload as sw
from rl.bench import workload as w
from rl.bench.memory import TreeSampler, peak_rss_mib


def _save_model(folder: Path) -> Any:
    from rl.core.config import load_config
    from rl.core.demo import DEMO_CONFIG
    from rl.core.models import load_causal_lm, load_tokenizer

    config = load_config(DEMO_CONFIG, [])
    tokenizer = load_tokenizer(config.model)
    model = load_causal_lm(config.model, tokenizer, seed=w.SEED)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return tokenizer


def _dataset(steps: int) -> Any:
    from datasets import Dataset

    from rl.core.demo import builtin_rows

    rows = builtin_rows("builtin:arithmetic", steps * w.PROMPTS, w.SEED, 9)
    return Dataset.from_list([{"prompt": r["prompt"], "answer": r["answer"]} for r in rows])


def _reward(completions: list[str], answer: list[str], **_: Any) -> list[float]:
    from rl.core.rewards.rule_based import arithmetic

    return [arithmetic(text, truth) for text, truth in zip(completions, answer, strict=True)]


def run(variant: str, steps: int, shape: sw.ShapeRun | None = None) -> w.RunResult:
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    times: list[float] = []
    logged: list[dict[str, float]] = []

    class StepTimer(TrainerCallback):  # type: ignore[misc]
        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.started = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            times.append(time.perf_counter() - self.started)

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **_: Any) -> None:
            logged.append(dict(logs or {}))

    sampler = TreeSampler(enabled=shape is not None)  # the tiny workload: ru_maxrss only
    with tempfile.TemporaryDirectory(prefix="rl-bench-trl-") as folder, sampler:
        out_dir = Path(folder) / "out"
        if shape is None:
            model_dir = Path(folder) / "model"
            tokenizer = _save_model(model_dir)
            dataset, reward, completion_tokens = _dataset(steps), _reward, w.MAX_RESPONSE_TOKENS
        else:
            from datasets import Dataset
            from transformers import AutoTokenizer

            model_dir = shape.model
            tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
            dataset = Dataset.from_list(sw.trl_dataset_rows(sw.rows(steps)))
            reward, completion_tokens = sw.gsm8k_reward, sw.MAX_RESPONSE_TOKENS
        args = GRPOConfig(
            output_dir=str(out_dir),
            use_cpu=True,
            use_vllm=False,
            gradient_checkpointing=False,
            per_device_train_batch_size=w.COMPLETIONS,
            num_generations=w.RESPONSES_PER_PROMPT,
            max_completion_length=completion_tokens,
            steps_per_generation=1,
            num_iterations=1,
            temperature=1.0,
            learning_rate=w.LEARNING_RATE,
            lr_scheduler_type="constant",
            warmup_steps=0,
            beta=w.KL_COEF if variant == "kl" else 0.0,
            max_steps=steps,
            seed=w.SEED,
            logging_steps=1,
            report_to="none",
            save_strategy="no",
            dataloader_num_workers=0,
            bf16=False,
            fp16=False,
        )
        trainer = GRPOTrainer(
            model=str(model_dir),
            reward_funcs=reward,
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            callbacks=[StepTimer()],
        )
        trainer.train()
    first_kl = next((row["kl"] for row in logged if "kl" in row), None)
    lengths = [row["completions/mean_length"] for row in logged if "completions/mean_length" in row]
    return w.RunResult(
        "trl",
        variant,
        times,
        {},
        peak_rss_mib(),
        first_kl,
        engine="hf",
        tree_peak_rss_mib=sampler.peak_mib,
        response_len=lengths,
    )
