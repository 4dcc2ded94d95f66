"""The driver loop (single controller): resume, warm-start, steps, validation, checkpoints, export."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from rl.core.config import Config, dump_config
from rl.core.logging import make_tracker
from rl.core.logging.sinks import trim_metrics_file
from rl.core.trainer import losses
from rl.core.trainer.build import build_context, build_sft_engine
from rl.core.trainer.checkpoint import checkpoint_dir, find_resume_checkpoint, save_checkpoint
from rl.core.trainer.rng import rng_state, seed_everything, set_rng_state
from rl.core.trainer.sft import run_sft_steps
from rl.core.trainer.step import rl_step
from rl.core.trainer.validate import validate
from rl.core.weight_sync import sync_weights


def prepare_output_dir(config: Config) -> Path:
    output_dir = Path(config.trainer.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "config.yaml").write_text(dump_config(config))
    return output_dir


def _roles(ctx: Any) -> dict[str, Any]:
    return {
        name: engine
        for name, engine in (("actor", ctx.actor), ("critic", ctx.critic), ("ref", ctx.ref))
        if engine is not None
    }


def save_run(ctx: Any, step: int, kl_ctrl: Any) -> Path:
    def write(folder: Path) -> None:
        for name, engine in _roles(ctx).items():
            engine.save(str(folder / name))
        torch.save(
            {
                "step": step,
                "rng": rng_state(),
                "sampler": ctx.sampler.state_dict(),
                "kl_ctrl": losses.kl_state(kl_ctrl),
            },
            folder / "trainer_state.pt",
        )

    root = checkpoint_dir(ctx.output_dir)
    return save_checkpoint(root, step, write, ctx.config.trainer.max_ckpt_to_keep)


def load_run(ctx: Any, folder: Path, kl_ctrl: Any) -> int:
    for name, engine in _roles(ctx).items():
        engine.load(str(folder / name))
    state = torch.load(folder / "trainer_state.pt", weights_only=False)
    ctx.sampler.load_state_dict(state["sampler"])
    losses.load_kl_state(kl_ctrl, state["kl_ctrl"])
    set_rng_state(state["rng"])
    return int(state["step"])


def warm_start(ctx: Any) -> dict[str, float]:
    """Optional SFT, then the reference starts from the (warm) actor; returns SFT metrics."""
    metrics = {}
    if ctx.config.sft.enable and ctx.config.sft.steps > 0:
        sft = build_sft_engine(ctx.config, ctx.tokenizer)
        sft.load_weights(ctx.actor.export_weights())
        sft_losses = run_sft_steps(sft, ctx.train_data, ctx.tokenizer, ctx.config)
        ctx.actor.load_weights(sft.export_weights())
        metrics = {"sft/loss_first": sft_losses[0], "sft/loss_last": sft_losses[-1]}
    if ctx.ref is not None:
        ctx.ref.load_weights(ctx.actor.export_weights())
    return metrics


def run_training(config: Config) -> dict[str, float]:
    """Train with RL as configured; returns the last validation metrics."""
    output_dir = prepare_output_dir(config)
    seed_everything(config.trainer.seed)
    losses.validate_algorithm_names(config)
    ctx = build_context(config, output_dir)
    kl_ctrl = losses.make_kl_controller(config)
    resume = find_resume_checkpoint(
        checkpoint_dir(output_dir), config.trainer.resume_mode, config.trainer.resume_from_path
    )
    step = load_run(ctx, resume, kl_ctrl) if resume is not None else 0
    # A resumed run drops rows logged past its checkpoint; a fresh one starts a new file.
    trim_metrics_file(output_dir, step if resume is not None else -1)
    tracker = make_tracker(config, output_dir, ctx.total_steps)
    warm_metrics = warm_start(ctx) if resume is None else {}
    sync_weights(ctx.actor.export_weights(), ctx.rollout)
    last_val: dict[str, float] = {}
    if config.trainer.val_before_train and step == 0:
        last_val = _validate(ctx, tracker, step, extra=warm_metrics)
    while step < ctx.total_steps:
        items = [ctx.train_data[i] for i in ctx.sampler.next_batch()]
        metrics = rl_step(ctx, items, step, kl_ctrl)
        step += 1
        freq = config.trainer.test_freq
        if step == ctx.total_steps or (freq > 0 and step % freq == 0):
            last_val = _validate(ctx, tracker, step, log=False)
            metrics.update(last_val)
        tracker.log(metrics, step)
        if config.trainer.save_freq > 0 and step % config.trainer.save_freq == 0:
            save_run(ctx, step, kl_ctrl)
    ctx.actor.save_hf(str(output_dir / "hf"), ctx.tokenizer)
    tracker.close()
    return last_val


def _validate(
    ctx: Any, tracker: Any, step: int, log: bool = True, extra: dict[str, float] | None = None
) -> dict[str, float]:
    metrics, samples = validate(ctx)
    tracker.log_generations(samples, step)
    if log:
        tracker.log({**(extra or {}), **metrics}, step)
    return metrics


def run_sft(config: Config) -> list[float]:
    """`rl sft`: supervised fine-tuning only; the result is saved as a Hugging Face folder."""
    output_dir = prepare_output_dir(config)
    seed_everything(config.trainer.seed)
    ctx = build_context(config, output_dir, with_rl_roles=False)
    engine = build_sft_engine(config, ctx.tokenizer)
    tracker = make_tracker(config, output_dir, config.sft.steps)
    result = run_sft_steps(engine, ctx.train_data, ctx.tokenizer, config, log=tracker.log)
    engine.save_hf(str(output_dir / "hf"), ctx.tokenizer)
    tracker.close()
    return result
