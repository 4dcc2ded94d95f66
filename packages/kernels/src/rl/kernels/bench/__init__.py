"""Standalone kernel benchmarks: `python -m rl.kernels.bench <op> [options]`."""
