"""Whole-step and cross-package benchmarks of the stack (`python -m rl.bench <name>`).

- `grpo-step`: an RL step end to end, side by side with TRL's GRPOTrainer.
- `modes`: RL steps in each `trainer.mode` (sync, one-step-off, async), side by side.
- `verl-journey`: step time and peak memory of a verl user's job at a real model shape.

Each package's own benchmarks live in its `bench` subpackage (`python -m rl.kernels.bench`,
`rl.core.bench`, `rl.rollout.bench`, `rl.fsdp.bench`); all share
`rl.kernels.bench.harness`. No shipped module imports a benchmark.
"""
