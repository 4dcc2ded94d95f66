"""Fixtures every package's tests share (pytest collects this file from the rootdir).

`verl_release(version)`: the folder holding verl's released package (`verl/`) as pip
installs it, fetched by scripts/fetch-upstream.sh (run by scripts/install-dev.sh). Tests
read its config files as a verl user's run reads them, and load its reward functions as
the oracle of rl's verl-compatible scorers. Nothing of verl is imported by rl itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).parent
UPSTREAM = ROOT / ".upstream"
VERL_RELEASES = ("0.6.1", "0.7.1", "0.9.1")  # keep in step with scripts/fetch-upstream.sh


def verl_release_path(version: str) -> Path:
    """`.upstream/verl-<version>`; the test fails (never skips) when it was not fetched."""
    if version not in VERL_RELEASES:
        raise ValueError(f"verl {version} is not fetched; fetched: {', '.join(VERL_RELEASES)}")
    root = UPSTREAM / f"verl-{version}"
    if not (root / "verl" / "trainer" / "config" / "ppo_trainer.yaml").is_file():
        pytest.fail(f"{root} is missing: run scripts/fetch-upstream.sh (install-dev.sh does)")
    return root


@pytest.fixture(scope="session")
def verl_release():
    """`verl_release(version)` -> the folder that holds verl's package of that release."""
    return verl_release_path
