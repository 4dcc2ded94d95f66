"""Sessions: tests (CPU), gpu_tests, lint, bench, build, gpu_wheels, gpu_campaign.

`nox -s tests` installs exactly as the README does (scripts/install-dev.sh)
into a fresh virtualenv and runs pytest over every package. On a GPU box with
torch+CUDA already installed and no package index, use
`nox --no-venv -s gpu_tests`.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).parent
sys.path.insert(0, str(ROOT / "scripts"))
from gpu_test_files import gpu_test_files  # noqa: E402

PACKAGES = ["kernels", "core", "fsdp-backend", "megatron-backend", "rollout", "cli"]
PURE_PACKAGES = [p for p in PACKAGES if p != "kernels"]
# GPU tests are collected file by file (scripts/gpu_test_files.py: every package's test
# files naming the gpu/multigpu mark), so a GPU box without vLLM, Ray or megatron-core
# never imports the CPU stack's tests.
GPU_MARKS = "gpu or multigpu"
# every test's time in the last full CPU run on a 2-core machine (scripts/suite_budget.py)
DURATIONS = "benchmarks/ci/durations.txt"

nox.options.sessions = ["tests", "lint"]
nox.options.reuse_existing_virtualenvs = True


def _pytest(session: nox.Session, *args: str) -> None:
    # Exit code 5 ("no tests collected") must fail: a run that tests nothing is not green.
    session.run("python", "-m", "pytest", *args, *session.posargs)


@nox.session(python="3.11")
def tests(session: nox.Session) -> None:
    """CPU test suite over all packages (GPU tests are skipped). With --no-venv it tests the
    environment it runs in as it is (the README's: install-dev.sh already ran there)."""
    if session.venv_backend != "none":
        session.run("bash", "scripts/install-dev.sh", external=True)
    # Two pytest workers, one test file at a time (module fixtures are built once): much of
    # the suite waits on subprocesses, Ray and vLLM start-up, so on the 2-core CI machine this
    # took the suite from ~72 to ~61 min. Each worker and the processes it starts use
    # cores // workers threads (conftest.py). Files are handed out longest first, as the
    # committed durations of a full run measured them (scripts/suite_budget.py), so that no
    # long file starts last; every test's time goes to .test-durations.txt and the slowest,
    # the slowest files and each worker's finish are printed at the end (docs/testing.md).
    _pytest(
        session,
        "-m",
        "not gpu and not multigpu",
        "-n",
        "2",
        "--dist",
        "loadfile",
        "--no-loadscope-reorder",
        f"--budget-order={DURATIONS}",
        "--budget-durations=.test-durations.txt",
        "--budget-report=25",
        "packages",
    )


@nox.session
def gpu_tests(session: nox.Session) -> None:
    """GPU tests (`pytest -m "gpu or multigpu"`) of every package. With --no-venv, uses the
    current torch+CUDA environment."""
    if session.venv_backend == "none":
        _install_without_index(session)
    else:
        session.install(*[f"-e./packages/{p}" for p in PACKAGES], "pytest", "hypothesis")
    env = {"RL_KERNELS_CUDA": os.environ.get("RL_KERNELS_CUDA", "ON")}
    files = [str(path.relative_to(ROOT)) for path in gpu_test_files()]
    session.run("python", "-m", "pytest", "-m", GPU_MARKS, *files, *session.posargs, env=env)


def _install_without_index(session: nox.Session) -> None:
    """Install into an environment that has torch+CUDA, build tools and no package index."""
    session.run(
        "python",
        "-m",
        "pip",
        "install",
        "--no-build-isolation",
        "--no-deps",
        "--no-index",
        "-e",
        "packages/kernels",
        env={"RL_KERNELS_CUDA": "ON"},
    )
    if importlib.util.find_spec("hatchling") is not None:
        session.run(
            "python",
            "-m",
            "pip",
            "install",
            "--no-build-isolation",
            "--no-deps",
            "--no-index",
            *[f"-e./packages/{p}" for p in PURE_PACKAGES],
        )
    else:  # no build backend for the pure packages: put their sources on the path
        paths = [str(ROOT / "packages" / p / "src") for p in PURE_PACKAGES]
        session.env["PYTHONPATH"] = os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")])


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check + ruff format --check over the repo, mypy on rl.core and the config
    dialects (rl.cli.dialects, type-checked with rl.core before they moved to rl-cli)."""
    session.install("ruff>=0.6", "mypy>=1.10", "types-PyYAML")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy", "packages/core/src/rl/core", "packages/cli/src/rl/cli/dialects")


@nox.session
def bench(session: nox.Session) -> None:
    """Kernel benchmarks (`python -m rl.kernels.bench <op>`, rl-kernels alone); rows are
    appended under packages/kernels/benchmarks/results/. Posargs pick the ops (also
    `reshard`); the reshard rows with rl-core's delta check come from
    `python -m rl.core.bench.reshard` (benchmarks/reshard/)."""
    if session.venv_backend != "none":
        # transformers: the varlen benchmark trains a Hugging Face model
        session.install("torch==2.13.0", "transformers", "-e./packages/kernels")
    results = ROOT / "packages" / "kernels" / "benchmarks" / "results"
    for op in session.posargs or ["bucket", "logprob", "partition", "varlen"]:
        session.run("python", "-m", "rl.kernels.bench", op, "--csv", str(results / f"{op}.csv"))


@nox.session(python="3.11")
def bench_grpo(session: nox.Session) -> None:
    """Our GRPO step side by side with TRL's GRPOTrainer (`python -m rl.bench grpo-step`);
    raw rows and the report go to benchmarks/results/grpo_step/. Posargs go to the command
    (e.g. `nox -s bench_grpo -- --rounds 3`)."""
    if session.venv_backend != "none":
        session.run("bash", "scripts/install-dev.sh", external=True)
        session.install("-e./packages/cli[bench]")
    out = ROOT / "benchmarks" / "results" / "grpo_step"
    session.run("python", "-m", "rl.bench", "grpo-step", "--out", str(out), *session.posargs)


@nox.session
def build(session: nox.Session) -> None:
    """Wheels and sdists of all six packages into dist/.

    `python -m build` builds each wheel *from its sdist* in an isolated
    environment without torch, which proves the rl-kernels sdist is complete.
    """
    session.install("build>=1.2")
    dist = ROOT / "dist"
    for package in PACKAGES:
        session.run("python", "-m", "build", "--outdir", str(dist), f"packages/{package}")
    wheels = sorted(dist.glob("rl_*.whl"))
    session.log("built: " + ", ".join(w.name for w in wheels))
    names = {w.name.split("-")[0] for w in wheels}
    expected = {f"rl_{p.split('-')[0]}" for p in PACKAGES}
    if names != expected:
        session.error(f"expected wheels for {sorted(expected)}, got {sorted(names)}")


@nox.session(venv_backend="none")
def gpu_wheels(session: nox.Session) -> None:
    """The folder a GPU box installs from without network (dist/gpu-wheels/, < 64 MiB, with
    MANIFEST.txt): our wheels, the rl-kernels sdist and its build requirements, the pure
    wheels the campaign needs (scripts/gpu_wheels.py). Posargs go to the script."""
    session.run("python", "scripts/gpu_wheels.py", *session.posargs)


@nox.session(venv_backend="none")
def gpu_campaign(session: nox.Session) -> None:
    """On one GPU box without network: install from dist/gpu-wheels/, then gpu_tests, the
    kernel benchmarks and the GRPO step at real shapes, each call under 10 minutes, ~12 min
    in all (scripts/gpu_campaign.py). `nox -s gpu_campaign -- --dry-run` checks it on a CPU."""
    session.run("python", "scripts/gpu_campaign.py", *session.posargs)


@nox.session
def install_check(session: nox.Session) -> None:
    """`pip install rl-core rl-megatron` from freshly built wheels into a clean virtualenv:
    the registry finds the megatron engine and a tiny GPT runs forward (~3 min)."""
    session.install("build>=1.2")
    dist = ROOT / "dist"
    for package in ("kernels", "core", "megatron-backend"):
        session.run(
            "python", "-m", "build", "--wheel", "--outdir", str(dist), f"packages/{package}"
        )
    session.run("python", "scripts/check_install.py", "--dist", str(dist))


@nox.session
def demo_seeds(session: nox.Session) -> None:
    """The embedded demo over seeds 1-5 (~10 min on 2 cores): start/final validation
    accuracy as mean ± sd; `nox --no-venv -s demo_seeds -- --seeds 1 2` for fewer."""
    if session.venv_backend != "none":
        session.run("bash", "scripts/install-dev.sh", external=True)
    session.run("python", "scripts/demo_seeds.py", *session.posargs)
