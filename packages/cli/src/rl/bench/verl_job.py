"""A verl user's job as lists of verl's own keys: the quickstart's overrides, verl's GRPO
settings, the one-CPU shrink and the `rl train --from verl` command line that runs them.

The verl-journey benchmark (`python -m rl.bench verl-journey`) and the tests
(`packages/cli/tests/test_verl_journey.py`, the root conftest's `verl_quickstart`
fixture) run the same job from these lists. Pure data and one function: nothing heavy is
imported.
"""

from __future__ import annotations

from collections.abc import Iterable
from os import PathLike
from pathlib import Path

# verl's quickstart (its docs/start/quickstart.rst: PPO on GSM8K with a critic and the vLLM
# rollout) but the model and data paths, which each run gives
VERL_QUICKSTART = (
    "data.train_batch_size=256",
    "data.max_prompt_length=512",
    "data.max_response_length=512",
    "actor_rollout_ref.actor.optim.lr=1e-6",
    "actor_rollout_ref.actor.ppo_mini_batch_size=64",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
    "actor_rollout_ref.rollout.name=vllm",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
    "actor_rollout_ref.rollout.gpu_memory_utilization=0.4",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4",
    "critic.optim.lr=1e-5",
    "critic.ppo_micro_batch_size_per_gpu=4",
    "algorithm.kl_ctrl.kl_coef=0.001",
    "trainer.logger=console",
    "trainer.val_before_train=False",
    "trainer.n_gpus_per_node=1",
    "trainer.nnodes=1",
    "trainer.save_freq=10",
    "trainer.test_freq=10",
    "trainer.total_epochs=15",
)

# one CPU, two steps (verl's own keys)
SHRINK = [
    "trainer.device=cpu",
    "data.train_batch_size=4",
    "data.max_response_length=16",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
    "critic.ppo_micro_batch_size_per_gpu=2",
    "trainer.total_training_steps=2",
    "trainer.log_val_generations=4",
]

# verl's GRPO settings (its examples/grpo_trainer scripts)
GRPO = [
    "algorithm.adv_estimator=grpo",
    "actor_rollout_ref.rollout.n=2",
    "actor_rollout_ref.actor.use_kl_loss=True",
    "actor_rollout_ref.actor.kl_loss_coef=0.001",
    "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
    "actor_rollout_ref.actor.entropy_coeff=0",
]


def verl_quickstart_overrides(
    model: str | PathLike[str], train: str | PathLike[str], val: str | PathLike[str]
) -> list[str]:
    """verl's quickstart overrides for this model and these data files."""
    return [
        f"data.train_files={train}",
        f"data.val_files={val}",
        f"actor_rollout_ref.model.path={model}",
        f"critic.model.path={model}",
        *VERL_QUICKSTART,
    ]


def journey_command(
    rl: str,
    release_path: Path,
    quickstart: Iterable[str],
    out: str | PathLike[str],
    extra: Iterable[str],
) -> list[str]:
    """`rl train --from verl` on the release's ppo_trainer.yaml with the quickstart's
    overrides, the one-CPU shrink, the output folder, then `extra`."""
    config = Path(release_path) / "verl" / "trainer" / "config" / "ppo_trainer.yaml"
    return [
        rl,
        "train",
        "--from",
        "verl",
        str(config),
        *quickstart,
        *SHRINK,
        f"trainer.default_local_dir={out}",
        *extra,
    ]
