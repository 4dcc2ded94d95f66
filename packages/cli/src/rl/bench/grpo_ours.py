"""Our side of `rl.bench grpo-step`: `rl train` on the workload, in this process."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from rl.bench import workload as w
from rl.bench.memory import TreeSampler, peak_rss_mib
from rl.bench.shape_workload import ShapeRun, our_overrides


def overrides(variant: str, steps: int, output_dir: Path) -> list[str]:
    """The workload as `rl train` overrides of the embedded demo config."""
    keys = [
        "sft.enable=false",
        f"data.train_batch_size={w.PROMPTS}",
        f"data.max_response_length={w.MAX_RESPONSE_TOKENS}",
        "data.builtin_val_size=8",
        f"rollout.n={w.RESPONSES_PER_PROMPT}",
        "rollout.temperature=1.0",
        f"actor.ppo_mini_batch_size={w.PROMPTS}",  # one optimizer step per RL step
        # every pass over all responses at once, as TRL's per_device_train_batch_size has it
        f"actor.ppo_micro_batch_size_per_gpu={w.COMPLETIONS}",
        f"ref.log_prob_micro_batch_size_per_gpu={w.COMPLETIONS}",
        f"rollout.log_prob_micro_batch_size_per_gpu={w.COMPLETIONS}",
        f"actor.optim.lr={w.LEARNING_RATE}",
        "actor.optim.lr_scheduler=constant",
        f"trainer.total_training_steps={steps}",
        f"trainer.seed={w.SEED}",
        "trainer.test_freq=-1",
        "trainer.val_before_train=false",
        "trainer.progress_bar=false",
        "trainer.resume_mode=disable",
        "trainer.save_freq=-1",
        "trainer.logger=[jsonl]",
        f"trainer.output_dir={output_dir}",
    ]
    if variant == "invariant":
        keys.append("rollout.batch_invariant=true")
    if variant == "kl":
        keys += [
            "actor.use_kl_loss=true",
            "actor.kl_loss_type=low_var_kl",
            f"actor.kl_loss_coef={w.KL_COEF}",
        ]
    return keys


def config(
    variant: str,
    steps: int,
    output_dir: Path,
    extra: list[str] | None = None,
    shape: ShapeRun | None = None,
) -> Any:
    """The run's config: the tiny workload's keys, then the real shape's, then `extra`."""
    from rl.core.config import load_config
    from rl.core.demo import DEMO_CONFIG

    keys = overrides(variant, steps, output_dir)
    if shape is not None:
        keys += our_overrides(shape)
    return load_config(DEMO_CONFIG, [*keys, *(extra or [])])


def run(
    variant: str, steps: int, extra: list[str] | None = None, shape: ShapeRun | None = None
) -> w.RunResult:
    from rl.core.trainer.loop import run_training
    from rl.core.trainer.timers import current_phase

    with tempfile.TemporaryDirectory(prefix="rl-bench-") as folder:
        output_dir = Path(folder)
        # the tiny workload keeps its timings free of a sampler thread (nothing to add:
        # no child processes there); ru_maxrss is its peak
        sampler = TreeSampler(current_phase, enabled=shape is not None)
        with sampler:
            run_training(config(variant, steps, output_dir, extra, shape))
        lines = (output_dir / "metrics.jsonl").read_text().splitlines()
    rows = [row for row in map(json.loads, lines) if "timing/step" in row]
    phases: dict[str, list[float]] = {}
    for row in rows:
        for key, value in row.items():
            if key.startswith("timing/") and key != "timing/step":
                phases.setdefault(key.removeprefix("timing/"), []).append(value)
    return w.RunResult(
        "ours",
        variant,
        [row["timing/step"] for row in rows],
        phases,
        peak_rss_mib(),
        rows[0].get("actor/kl_loss") if variant == "kl" else None,
        engine=shape.engine if shape else "hf",
        fused=shape.fused if shape else "auto",
        tree_peak_rss_mib=sampler.peak_mib,
        phase_peak_rss_mib=sampler.phase_peak_mib,
        response_len=[row.get("response/length_mean", 0.0) for row in rows],
    )
