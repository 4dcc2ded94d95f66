"""`nox -s gpu_wheels`: the folder a GPU box without network installs from (dist/gpu-wheels/).

It holds:
- the wheels of our five pure-Python packages (rl-core, rl-fsdp, rl-megatron, rl-rollout,
  rl-cli);
- rl-kernels as its **sdist**, with the wheels of its build requirements (scikit-build-core,
  pybind11, their pure dependencies, and the cmake and ninja wheels for a box without
  cmake >= 3.24). It is compiled on the box, offline, by `pip install --no-index
  --find-links <folder>` with `RL_KERNELS_CUDA=ON` when nvcc is there. Why not a wheel
  built here: the C++ module is tagged for one CPython (the box's may differ) and the CUDA
  one should target the box's own GPU architecture; the sources are small and compile in
  seconds on the box, and the Triton kernels need no compile at all (without nvcc the
  build still gives the C++ CPU module and the Triton path);
- the pure-Python wheels the campaign needs and a torch+CUDA+Triton+transformers box may
  lack (EXTRAS: pytest, hypothesis, omegaconf, rich, typer, hydra-core, liger-kernel as the
  logprob peer, ...), at the versions installed here when they are. Not torch, not vLLM,
  and not TRL: TRL needs `datasets`, hence pyarrow and pandas (compiled, ~60 MB); the
  campaign runs the GRPO step without the TRL side where TRL is not importable, and says so.

The folder must stay under 64 MiB; MANIFEST.txt lists every file with its size.
`python scripts/gpu_wheels.py [--out DIR]`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PURE_PACKAGES = ["core", "fsdp-backend", "megatron-backend", "rollout", "cli"]
LIMIT_MIB = 64.0
HATCHLING = "hatchling>=1.21"  # our pure packages' build backend (their pyproject.toml)
MANIFEST = "MANIFEST.txt"

# Distribution names; each is pinned to the version installed here when there is one.
EXTRAS = [
    # the test runner and what the GPU test files import
    "pytest",
    "pluggy",
    "iniconfig",
    "packaging",
    "pygments",
    "hypothesis",
    "sortedcontainers",
    "attrs",
    # rl-core / rl-cli imports a transformers box may not have
    "omegaconf",
    "antlr4-python3-runtime",  # sdist only on PyPI: built into a wheel here
    "rich",
    "markdown-it-py",
    "mdurl",
    "typer",
    "click",
    "shellingham",
    "hydra-core",
    # the logprob benchmark's peer (a Triton kernel library, pure Python)
    "liger-kernel",
    # building the rl-kernels sdist offline
    "scikit-build-core",
    "pybind11",
    "pathspec",
    "cmake",
    "ninja",
]
# Where the version installed here has compiled wheels only: the last pure-Python release.
PURE_PINS = {"hypothesis": "hypothesis<6.156"}
OURS = ("rl_core", "rl_fsdp", "rl_megatron", "rl_rollout", "rl_cli", "rl_kernels")


def pinned(name: str) -> str:
    if name in PURE_PINS:
        return PURE_PINS[name]
    try:
        return f"{name}=={metadata.version(name)}"
    except metadata.PackageNotFoundError:
        return name


def build(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("*.whl"), *out.glob("*.tar.gz"), out / MANIFEST]:
        old.unlink(missing_ok=True)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    wheel = [*pip, "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out)]
    subprocess.run([*wheel, *(pinned(e) for e in EXTRAS)], check=True, timeout=900)
    # our pure packages share one hatchling (an isolated build installs it once per package)
    with tempfile.TemporaryDirectory(prefix="hatchling-") as backend:
        subprocess.run(
            [*pip, "install", "--quiet", "--target", backend, HATCHLING], check=True, timeout=600
        )
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [backend, os.environ.get("PYTHONPATH")])),
        }
        local = [str(ROOT / "packages" / p) for p in PURE_PACKAGES]
        subprocess.run([*wheel, "--no-build-isolation", *local], check=True, timeout=600, env=env)
    sdist = [sys.executable, "-m", "build", "--sdist", "--outdir", str(out)]
    subprocess.run([*sdist, str(ROOT / "packages" / "kernels")], check=True, timeout=600)


def check(out: Path, limit_mib: float = LIMIT_MIB) -> list[str]:
    """Problems with the folder (empty when it is complete and small enough)."""
    files = sorted([*out.glob("*.whl"), *out.glob("*.tar.gz")])
    names = {f.name.split("-")[0].lower().replace("_", "-") for f in files}
    problems = [f"missing {e}" for e in EXTRAS if e.replace("_", "-") not in names]
    problems += [f"missing {o}" for o in OURS if o.replace("_", "-") not in names]
    if not any(f.name.startswith("rl_kernels-") and f.name.endswith(".tar.gz") for f in files):
        problems.append("missing the rl-kernels sdist")
    for f in files:
        if f.suffix == ".whl" and "-py3-none-" not in f.name and "-py2.py3-none-" not in f.name:
            problems.append(f"{f.name} is tied to one CPython: the box's may differ")
    total = sum(f.stat().st_size for f in files) / 2**20
    if total > limit_mib:
        problems.append(f"{total:.1f} MiB in all, over the {limit_mib:g} MiB limit")
    return problems


def write_manifest(out: Path) -> Path:
    files = sorted([*out.glob("*.whl"), *out.glob("*.tar.gz")])
    total = sum(f.stat().st_size for f in files)
    lines = [f"{f.stat().st_size:>12,d}  {f.name}" for f in files]
    lines.append(f"{total:>12,d}  total ({total / 2**20:.1f} MiB of {LIMIT_MIB:g} MiB)")
    (out / MANIFEST).write_text("\n".join(lines) + "\n")
    return out / MANIFEST


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist" / "gpu-wheels")
    args = parser.parse_args(argv)
    build(args.out)
    print(write_manifest(args.out).read_text(), end="")
    problems = check(args.out)
    for problem in problems:
        print(f"gpu_wheels: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
