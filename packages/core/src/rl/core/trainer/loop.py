"""The driver loop (single controller): resume, warm-start, steps, validation, checkpoints, export."""

from __future__ import annotations

import logging
import time
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rl.core import atomic_files
from rl.core.checkpoint_io import load_state, save_state
from rl.core.config import Config, dump_config
from rl.core.config.paths import user_path
from rl.core.errors import CheckpointError, ConfigError
from rl.core.logging import make_tracker
from rl.core.logging.sinks import trim_metrics_file, trim_step_rows
from rl.core.rng import rng_state, seed_everything, set_rng_state
from rl.core.trainer import algorithm_setup, run_folder
from rl.core.trainer.build import build_context, build_sft_engine
from rl.core.trainer.checkpoint import (
    ResumePoint,
    checkpoint_dir,
    find_resume_checkpoint,
    save_checkpoint,
)
from rl.core.trainer.dynamic_sampling import filtered_step
from rl.core.trainer.health import TrainingHealth
from rl.core.trainer.manifest import new_run_id
from rl.core.trainer.pipeline import RolloutPipeline
from rl.core.trainer.preflight import preflight
from rl.core.trainer.resume_config import CONFIG_FILE, check_resumed_config
from rl.core.trainer.run_folder import hold, refuse_overwrite
from rl.core.trainer.sft import run_sft_steps, sft_steps
from rl.core.trainer.step import max_lag, rl_step
from rl.core.trainer.stop import StopRequest, stop_on_signals
from rl.core.trainer.validate import validate

if TYPE_CHECKING:
    from rl.core.trainer.context import RunContext

log = logging.getLogger(__name__)


def write_run_config(output_dir: Path, config: Config) -> None:
    """The run's resolved config, written (atomically) once the run is accepted: a run
    refused at start-up leaves the previous run's config.yaml as it was."""
    output_dir.mkdir(parents=True, exist_ok=True)
    atomic_files.write_text(output_dir / "config.yaml", dump_config(config))


def export_hf(ctx: RunContext, engine: Any) -> None:
    """The trained model as a Hugging Face folder, `<output_dir>/hf`, put in place whole
    (a failed export keeps the previous folder and says how much space it needed)."""
    atomic_files.write_dir(
        ctx.output_dir / "hf",
        lambda tmp: engine.save_hf(str(tmp), ctx.tokenizer),
        needed=model_bytes(ctx.config.model.path),
    )


def model_bytes(path: str) -> int | None:
    """The size of the weights in a model folder (about what an export of it writes)."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        return None
    found = [*folder.glob("*.safetensors"), *folder.glob("*.bin")]
    return sum(f.stat().st_size for f in found) or None


def _roles(ctx: RunContext) -> dict[str, Any]:
    return {
        name: engine
        for name, engine in (("actor", ctx.actor), ("critic", ctx.critic), ("ref", ctx.ref))
        if engine is not None
    }


def save_run(
    ctx: RunContext,
    step: int,
    kl_ctrl: Any,
    run_id: str,
    sampler_state: dict[str, Any] | None = None,
) -> Path:
    def write(folder: Path) -> None:
        (folder / CONFIG_FILE).write_text(dump_config(ctx.config))  # what trained it
        for name, engine in _roles(ctx).items():
            engine.save(str(folder / name))
        if ctx.config.trainer.save_hf:
            ctx.actor.save_hf(str(folder / "actor" / "hf"), ctx.tokenizer)
        save_state(
            {
                "step": step,
                "rng": rng_state(),
                "worker_rng": ctx.launched.rng_states(),
                "sampler": sampler_state or ctx.sampler.state_dict(),
                "kl_ctrl": algorithm_setup.kl_state(kl_ctrl),
            },
            folder / "trainer_state.pt",
        )

    root = checkpoint_dir(ctx.output_dir)
    return save_checkpoint(root, step, write, ctx.config.trainer.max_ckpt_to_keep, run_id)


def load_run(ctx: RunContext, point: ResumePoint, kl_ctrl: Any) -> int:
    """Restore every role and the trainer state from a verified checkpoint (no pickled code:
    everything loads with `weights_only=True`)."""
    for name, engine in _roles(ctx).items():
        engine.load(str(point.path / name))
    state = load_state(point.path / "trainer_state.pt")
    ctx.sampler.load_state_dict(state["sampler"])
    algorithm_setup.load_kl_state(kl_ctrl, state["kl_ctrl"])
    set_rng_state(state["rng"])
    if not ctx.launched.set_rng_states(state.get("worker_rng", [])):
        log.warning(
            "%s was written by another number of ranks: sampling continues from fresh random "
            "state (the run goes on, but not bit-identically to one that was not resumed)",
            point.path,
        )
    return int(state["step"])


def warn_dropped_settings(config: Config) -> None:
    """Say, as the run starts, which upstream settings it goes without (allowed by name
    with `--allow-unsupported`; kept in config.yaml as trainer.dropped_settings)."""
    for key, what in config.trainer.dropped_settings.items():
        log.warning("running WITHOUT %s = %s", key, what)


def warm_start(ctx: RunContext) -> dict[str, float]:
    """Optional SFT, then the reference starts from the (warm) actor; returns SFT metrics."""
    metrics = {}
    steps = sft_steps(ctx.config, len(ctx.train_data)) if ctx.config.sft.enable else 0
    if steps > 0:
        sft = build_sft_engine(ctx.config, ctx.tokenizer, steps)
        sft.load_weights(ctx.actor.export_weights())
        sft_losses = run_sft_steps(sft, ctx.train_data, ctx.tokenizer, ctx.config)
        ctx.actor.load_weights(sft.export_weights())
        metrics = {"sft/loss_first": sft_losses[0], "sft/loss_last": sft_losses[-1]}
    if ctx.ref is not None:
        ctx.ref.load_weights(ctx.actor.export_weights())
    return metrics


def run_training(config: Config) -> dict[str, float]:
    """Train with RL as configured; returns the last validation metrics. A SIGTERM or
    SIGINT stops it after a checkpoint (`RunStopped`, rl.core.trainer.stop)."""
    seed_everything(config.trainer.seed)
    preflight(config)
    warn_dropped_settings(config)
    output_dir = user_path(config.trainer.output_dir)
    with hold(output_dir):
        resume = resume_point(config, output_dir)
        ctx = build_context(config, output_dir)
        try:
            # after the roles started: `ray.init` installs its own SIGTERM handler
            with stop_on_signals(config.trainer.stop_grace_s) as stop:
                return _train(ctx, resume, stop)
        finally:
            ctx.close()


def resume_point(config: Config, output_dir: Path) -> ResumePoint | None:
    """The checkpoint this run resumes (its config compared with ours), or None for a fresh
    run (refused over an earlier run's files unless trainer.overwrite_output_dir)."""
    trainer = config.trainer
    if trainer.overwrite_output_dir:
        return None
    resume = find_resume_checkpoint(
        checkpoint_dir(output_dir), trainer.resume_mode, trainer.resume_from_path
    )
    if resume is None:
        refuse_overwrite(output_dir, overwrite=False)
        return None
    check_resumed_config(resume.path, config, output_dir, resume.step)
    return resume


def _refuse_past_end(resume: ResumePoint, total_steps: int) -> None:
    if resume.step > total_steps:
        raise CheckpointError(
            f"{resume.path} is at step {resume.step}, past this run's end "
            f"(trainer.total_training_steps = {total_steps}): resuming would export a later "
            "step than asked; raise trainer.total_training_steps, resume an earlier checkpoint "
            "(trainer.resume_mode=path), or make a model of this one with `rl merge`"
        )


def _train(ctx: RunContext, resume: ResumePoint | None, stop: StopRequest) -> dict[str, float]:
    config, output_dir, trainer = ctx.config, ctx.output_dir, ctx.config.trainer
    kl_ctrl = algorithm_setup.make_kl_controller(config)
    run_id = resume.run_id if resume is not None else new_run_id()
    if resume is not None:
        _refuse_past_end(resume, ctx.total_steps)
        step = load_run(ctx, resume, kl_ctrl)
    else:  # checked before the roles started: nothing here trained, or it may go
        run_folder.clear(output_dir)
        step = 0
    write_run_config(output_dir, config)
    if resume is not None:  # rows logged past the checkpoint go (they are logged again)
        trim_metrics_file(output_dir, step)
        trim_step_rows(output_dir / "val_generations.jsonl", step)
    tracker = make_tracker(config, output_dir, ctx.total_steps)
    warm_metrics = warm_start(ctx) if resume is None else {}
    ctx.sync_weights(step)
    health = TrainingHealth(trainer.max_skipped_steps)
    last_val: dict[str, float] = {}
    if trainer.val_before_train and step == 0:
        last_val = _validate(ctx, tracker, step, extra=warm_metrics)
    pipeline = _pipeline(ctx, step)
    saved = step  # the step of the newest checkpoint of this run (or its start)
    try:
        while step < ctx.total_steps and not stop.requested:
            started = time.perf_counter()
            freq = trainer.test_freq
            validating = step + 1 == ctx.total_steps or (freq > 0 and (step + 1) % freq == 0)
            if pipeline is None:
                sampler_state = None  # the sampler's own, when saved
                if config.algorithm.filter_groups.enable:  # draws the batches it needs
                    metrics = filtered_step(ctx, step, kl_ctrl)
                else:
                    items = [ctx.train_data[i] for i in ctx.sampler.next_batch()]
                    metrics = rl_step(ctx, items, step, kl_ctrl)
            else:
                metrics, sampler_state = pipeline.step(kl_ctrl, push=validating)
            metrics["timing/step"] = time.perf_counter() - started  # wall clock, waits included
            step += 1
            if validating:
                with pipeline.engine_idle() if pipeline is not None else nullcontext():
                    last_val = _validate(ctx, tracker, step, log=False)
                metrics.update(last_val)
            tracker.log(metrics, step)
            health.check(metrics, step)
            if (trainer.save_freq > 0 and step % trainer.save_freq == 0) or stop.requested:
                save_run(ctx, step, kl_ctrl, run_id, sampler_state)
                saved = step
    finally:
        if pipeline is not None:
            pipeline.close()
        if stop.requested:
            tracker.close()
    if stop.requested:
        raise stop.stopped(
            f"checkpoint at step {saved} in {checkpoint_dir(output_dir)}; run the same "
            "command again to resume from it"
            if saved > 0
            else "no step was trained, nothing to keep"
        )
    export_hf(ctx, ctx.actor)
    tracker.close()
    return last_val


def _pipeline(ctx: RunContext, step: int) -> RolloutPipeline | None:
    """The overlapped generation of `trainer.mode` (None: sync)."""
    trainer = ctx.config.trainer
    if trainer.mode == "sync":
        return None
    sync_every = 1 if trainer.mode == "one_step_off" else trainer.sync_every
    return RolloutPipeline(ctx, step, max_lag(ctx.config), sync_every)


def _validate(
    ctx: RunContext,
    tracker: Any,
    step: int,
    log: bool = True,
    extra: dict[str, float] | None = None,
) -> dict[str, float]:
    metrics, samples = validate(ctx)
    tracker.log_generations(samples, step)
    if log:
        tracker.log({**(extra or {}), **metrics}, step)
    return metrics


def run_sft(config: Config) -> list[float]:
    """`rl sft`: supervised fine-tuning only; the result is saved as a Hugging Face folder."""
    if config.sft.steps <= 0 and config.sft.epochs is None:
        raise ConfigError("sft.steps = 0: rl sft has nothing to train; set sft.steps or sft.epochs")
    seed_everything(config.trainer.seed)
    preflight(config, with_rl_roles=False)
    warn_dropped_settings(config)
    output_dir = user_path(config.trainer.output_dir)
    overwrite = config.trainer.overwrite_output_dir
    with hold(output_dir):
        refuse_overwrite(output_dir, overwrite)  # an SFT run has no checkpoints to resume
        ctx = build_context(config, output_dir, with_rl_roles=False)
        try:
            run_folder.clear(output_dir)  # what is left of an earlier run (checked above)
            write_run_config(output_dir, config)
            steps = sft_steps(config, len(ctx.train_data))
            engine = build_sft_engine(config, ctx.tokenizer, steps)
            tracker = make_tracker(config, output_dir, steps)
            result = run_sft_steps(engine, ctx.train_data, ctx.tokenizer, config, log=tracker.log)
            export_hf(ctx, engine)
            tracker.close()
            return result
        finally:
            ctx.close()
