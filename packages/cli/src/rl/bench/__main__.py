"""`python -m rl.bench <benchmark> [options]`; benchmarks: grpo-step, modes, reward-overlap,
verl-journey, weight-sync."""

from __future__ import annotations

import sys

BENCHMARKS = {
    "grpo-step": "rl.bench.grpo_step",
    "modes": "rl.bench.modes",
    "reward-overlap": "rl.bench.reward_overlap",
    "verl-journey": "rl.bench.verl_journey",
    "weight-sync": "rl.bench.weight_sync",
}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in BENCHMARKS:
        sys.exit(f"usage: python -m rl.bench {{{','.join(BENCHMARKS)}}} [options]")
    from importlib import import_module

    import_module(BENCHMARKS[sys.argv[1]]).main(sys.argv[2:])


if __name__ == "__main__":
    main()
