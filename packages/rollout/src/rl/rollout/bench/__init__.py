"""rl-rollout's benchmarks, each a runnable module; no shipped module imports them.

- `python -m rl.rollout.bench` (`engines`, with `engine_steps`): our vLLM engine against
  our HF engine (tokens/s), and the ways of loading weights into a running vLLM engine.
- `python -m rl.rollout.bench.hf_sampling`: the HF engine's sampling loop against
  transformers' `generate` drawing the same tokens.

Timing, quantiles, headers and CSV/JSON output come from `rl.kernels.bench.harness`.
"""
