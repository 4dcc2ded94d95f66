"""Whole-step benchmarks of the stack (`python -m rl.bench grpo-step`).

Kernel benchmarks are `python -m rl.kernels.bench`; this package times what a user
runs: an RL step end to end, side by side with a peer framework on the same workload.
"""
