"""DAPO's group filter (dynamic sampling): a group whose n samples all got the same value of
the filter metric has zero advantage under GRPO and teaches nothing; keep the others."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def informative_groups(values: Sequence[float], n: int) -> list[bool]:
    """For each group of `n` consecutive values (rows i*n .. i*n+n-1 are prompt i's
    samples), whether to keep it: its population std (numpy's, as verl's DAPO trainer
    computes it) is > 0, or it holds a single sample."""
    if n <= 0 or len(values) % n:
        raise ValueError(f"{len(values)} values do not split into groups of {n}")
    groups = np.asarray(values, dtype=np.float64).reshape(-1, n)
    return [n == 1 or float(np.std(group)) > 0 for group in groups]
