"""TRL's side of `rl.bench grpo-step`: `trl.GRPOTrainer` on the same workload.

The same model (the demo's tiny Qwen2 with the same seeded weights, saved to a folder so
that TRL builds its reference model from it as it would from a hub name), the same
tokenizer, prompts and reward. TRL counts `per_device_train_batch_size` in completions;
one generation per optimizer step (`steps_per_generation` 1, `num_iterations` 1), so its
old log-probs are the training forward's, as ours are on-policy.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from rl.bench import workload as w
from rl.bench.memory import peak_rss_mib


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


def run(variant: str, steps: int) -> w.RunResult:
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

    with tempfile.TemporaryDirectory(prefix="rl-bench-trl-") as folder:
        model_dir, out_dir = Path(folder) / "model", Path(folder) / "out"
        tokenizer = _save_model(model_dir)
        args = GRPOConfig(
            output_dir=str(out_dir),
            use_cpu=True,
            use_vllm=False,
            gradient_checkpointing=False,
            per_device_train_batch_size=w.COMPLETIONS,
            num_generations=w.RESPONSES_PER_PROMPT,
            max_completion_length=w.MAX_RESPONSE_TOKENS,
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
            reward_funcs=_reward,
            args=args,
            train_dataset=_dataset(steps),
            processing_class=tokenizer,
            callbacks=[StepTimer()],
        )
        trainer.train()
    first_kl = next((row["kl"] for row in logged if "kl" in row), None)
    return w.RunResult("trl", variant, times, {}, peak_rss_mib(), first_kl)
