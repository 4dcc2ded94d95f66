"""The `trainer` section, one class per concern, joined into `TrainerConfig`.

The keys stay flat under `trainer.` (verl's names: `trainer.output_dir`, `trainer.logger`);
each concern is a dataclass of its own with its checks: the run folder (where a run
lives, its checkpoints, resuming), the loop (its length, validation, seed), logging, the
launcher (where the roles run) and the mode (how generation and training overlap). A
field that may change when a run resumes says so (`free`, `run_length`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rl.core.config.resume_rules import free, run_length
from rl.core.config.rules import (
    FREQUENCY,
    NON_NEGATIVE,
    NOT_EMPTY,
    POSITIVE,
    POSITIVE_INT,
    SEED,
    check_fields,
    optional,
    require,
    setting,
)

LOGGERS = ("console", "jsonl", "tensorboard", "wandb", "mlflow", "swanlab")


@dataclass(frozen=True)
class RunFolderSettings:
    """Where the run lives: its folder, its checkpoints, and how it resumes."""

    project_name: str = free("rl")
    experiment_name: str = free("demo")
    output_dir: str = free("outputs/demo", NOT_EMPTY)
    save_freq: int = free(-1, FREQUENCY)
    max_ckpt_to_keep: int | None = free(2, optional(POSITIVE_INT))
    # each checkpoint also holds the actor as a Hugging Face folder (<ckpt>/actor/hf),
    # ChatLearn's save_hf / verl's checkpoint.save_contents "hf_model"; `rl merge` makes
    # one from any checkpoint afterwards
    save_hf: bool = free(False)
    resume_mode: Literal["auto", "disable", "path"] = free("auto")
    resume_from_path: str | None = free(None)
    # a fresh run in a folder holding an earlier run's files removes them (else refused)
    overwrite_output_dir: bool = free(False)
    # settings that change training and may differ from the resumed checkpoint's config
    # (dotted keys or shell patterns; `rl train --allow-config-change KEY`)
    allow_config_change: tuple[str, ...] = free(())

    def check_run_folder(self) -> None:
        require(
            self.resume_mode != "path" or bool(self.resume_from_path),
            "resume_from_path",
            self.resume_from_path,
            "a checkpoint folder when resume_mode is 'path'",
        )
        require(
            not (self.overwrite_output_dir and self.resume_mode == "path"),
            "overwrite_output_dir",
            self.overwrite_output_dir,
            "false when resume_mode is 'path' (a run cannot both resume and replace)",
        )


@dataclass(frozen=True)
class LoopSettings:
    """The training loop: its seed and length, validation, and when it gives up."""

    seed: int = setting(1, SEED)
    total_epochs: int = run_length(1, POSITIVE_INT)
    total_training_steps: int | None = run_length(None, optional(POSITIVE_INT))
    val_before_train: bool = free(True)
    test_freq: int = free(5, FREQUENCY)
    # stop when this many steps in a row skip their update (non-finite gradients)
    max_skipped_steps: int = free(5, POSITIVE_INT)
    # upstream settings this run goes without (`rl train --from X --allow-unsupported KEY`):
    # "dialect:key" -> "value (why rl cannot honour it)"; printed when the run starts
    dropped_settings: dict[str, str] = free(default_factory=dict)


@dataclass(frozen=True)
class LoggingSettings:
    """What the run reports, and where."""

    logger: tuple[str, ...] = free(("console", "jsonl"))
    log_val_generations: int = free(4, NON_NEGATIVE)
    progress_bar: bool = free(True)
    # the dense peak of one device for model.dtype, in TFLOPS: `perf/mfu/actor` is the
    # update's model FLOPs per second per device over it (rl.core.trainer.perf); null = the
    # known GPUs' bf16/fp16 tensor-core peak on CUDA, none on CPU (`perf/tflops/actor` only)
    device_peak_tflops: float | None = setting(None, optional(POSITIVE))

    def check_logging(self) -> None:
        for name in self.logger:
            require(name in LOGGERS, "logger", name, f"one of {sorted(LOGGERS)}")


@dataclass(frozen=True)
class LauncherSettings:
    """Where the roles run: in this process, or one Ray actor per device (the `cluster`
    section), and how long a call or a stop may take."""

    device: Literal["cpu", "cuda"] = free("cpu")
    launcher: Literal["local", "ray"] = free("local")
    ray_address: str | None = free(None)  # join this Ray cluster (multi-node); none: start one
    # a call to the workers that takes longer fails
    worker_timeout_s: float = free(1800.0, POSITIVE)
    # rollout replicas on devices of their own: replace up to this many lost replicas in
    # the run (died, hung, node lost); their rows are generated again by the others, which
    # carry the load until a replacement joins at a weight push. 0: a lost replica ends the
    # run (rl.core.workers.replicas)
    rollout_restarts: int = free(0, NON_NEGATIVE)
    # with rollout_restarts: before each weight push every replica is pinged; one that does
    # not answer within this many seconds is hung, and replaced (slime's
    # --rollout-health-check-timeout)
    rollout_health_check_timeout_s: float = free(60.0, POSITIVE)
    # SIGTERM/SIGINT: finish the step and checkpoint within this many seconds, else
    # abandon the step (rl.core.trainer.stop)
    stop_grace_s: float = free(300.0, POSITIVE)


@dataclass(frozen=True)
class ModeSettings:
    """How generation and training overlap (rl.core.trainer.pipeline)."""

    # sync: generate, then learn; one_step_off: step k+1's rollouts are generated (with the
    # weights before step k's update) while step k learns (verl's one-step-off policy);
    # async: rollouts run ahead by up to max_staleness updates, weights are pushed every
    # sync_every steps
    mode: Literal["sync", "one_step_off", "async"] = "sync"
    # async: how many updates a rollout's weights may lag
    max_staleness: int = setting(1, NON_NEGATIVE)
    # async: push the weights into the rollout engine every N steps
    sync_every: int = setting(1, POSITIVE_INT)
    # one_step_off / async: generate in pieces of partial_rollout_chunk tokens, so that a
    # weight push lands between pieces and a response goes on under the new weights
    # (verl: async_training.partial_rollout; ChatLearn: runtime_args.use_partial_rollout)
    partial_rollout: bool = False
    partial_rollout_chunk: int = setting(16, POSITIVE_INT)


@dataclass(frozen=True)
class TrainerConfig(
    ModeSettings, LauncherSettings, LoggingSettings, LoopSettings, RunFolderSettings
):
    """`trainer.*`: every concern's keys, flat."""

    def __post_init__(self) -> None:
        check_fields(self)  # each concern's declared rules, in key order
        self.check_run_folder()
        self.check_logging()
