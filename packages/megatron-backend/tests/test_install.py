"""The install line is a test: `pip install rl-core rl-megatron` from freshly built wheels
into a clean virtualenv (torch and megatron-core from the index, nothing else of ours)
finds the `megatron` engine in the registry and runs a tiny GPT forward
(`scripts/check_install.py`, also `nox -s install_check`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("build", reason="the `build` package makes the wheels")
pytestmark = [pytest.mark.slow, pytest.mark.megatron]

ROOT = Path(__file__).resolve().parents[3]


def test_rl_core_and_rl_megatron_alone_install_and_run(tmp_path):
    dist = tmp_path / "dist"
    for package in ("kernels", "core", "megatron-backend"):
        built = subprocess.run(
            [
                sys.executable,
                "-m",
                "build",
                "--wheel",
                "--outdir",
                str(dist),
                f"packages/{package}",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert built.returncode == 0, built.stderr[-3000:]
    checked = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_install.py"), "--dist", str(dist)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert checked.returncode == 0, (checked.stdout + checked.stderr)[-3000:]
    assert "registry: megatron rl-megatron" in checked.stdout
    assert "forward: (2, 8, 64)" in checked.stdout
