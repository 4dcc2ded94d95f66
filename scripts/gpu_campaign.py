"""`nox -s gpu_campaign`: the GPU measurements of issue 36, on one GPU box with no network.

Before: `nox -s gpu_wheels` (scripts/gpu_wheels.py) fills dist/gpu-wheels/ where an index
is reachable; the folder travels with the checkout. On the box, where torch with CUDA,
Triton and transformers are installed (vLLM, Ray, megatron-core, Liger, TRL may not be):

    nox -s gpu_campaign            # or: python scripts/gpu_campaign.py
    nox -s gpu_campaign -- --dry-run

It installs our packages from the folder into a fresh virtualenv over the box's own
packages (`<results>/venv`, removed at the end; the box's environment is left as it is),
exactly as the dry run below does: `pip --no-index --find-links`, our wheels with
--no-deps, rl-kernels compiled from its sdist with RL_KERNELS_CUDA=ON when nvcc is there,
the folder's other wheels only where the box lacks that distribution. Then it runs its
calls one after another, each a subprocess under a timeout of at most 10 minutes:
`gpu_tests` (every package's GPU-marked tests), the kernel benchmarks at the shapes of
packages/kernels/BENCHMARKS.md against the peers that import (Liger; verl), and
`python -m rl.bench grpo-step` at the Qwen2.5-0.5B and 1.5B shapes with the rollout
engines installed (vllm when it imports, else hf; TRL's side when trl and datasets import).

Budget: the calls' expected times add up to about 12 minutes of GPU time (the plan prints
each call's expected time, its timeout and the totals); a lent device gives 15 minutes
all in, start-up included. Each call's raw output goes to `<results>/<call>.log`, and
`<results>/summary.json` (rewritten after every call) holds the device, CUDA runtime and
driver, the versions of torch, Triton, transformers and ours, the date, each call's exit
status and time, and what the machine lacks, each with the reason it was skipped.

`--dry-run` (CPU, CI): lists the calls with their timeouts, installs every file of the
wheel folder into a fresh virtualenv (`python -m venv --system-site-packages`, with this
environment's site-packages behind it as the box's host packages: torch, transformers),
offline, the rl-kernels sdist compiled there (RL_KERNELS_CUDA=OFF: no GPU toolchain is
assumed in CI), imports each wheel's modules from that virtualenv and checks that each
call's entry module is there; exits non-zero on any failure.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import venv
import zipfile
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from gpu_test_files import gpu_test_files  # noqa: E402

CALL_LIMIT_S = 600  # the device runs one command for at most 10 minutes
BUDGET_S = 12 * 60  # expected GPU time of all calls together, the install included
INSTALL_S = 60  # pip from the folder; the rl-kernels sdist compiled for this GPU only
OUR_MODULES = ["rl.kernels", "rl.kernels._C", "rl.core", "rl.fsdp", "rl.rollout", "rl.cli"]
OURS = ("rl_core", "rl_fsdp", "rl_megatron", "rl_rollout", "rl_cli")
BUILD_ONLY = {"scikit_build_core", "pybind11", "pathspec", "cmake", "ninja"}  # build env only
PEERS = {  # distribution -> what the campaign loses without it
    "vllm": "grpo-step runs with the hf rollout engine only",
    "liger-kernel": "the logprob benchmark runs without the Liger peer",
    "verl": "the logprob benchmark runs without verl's linear_cross_entropy peer",
    "trl": "grpo-step runs our side only (--no-trl)",
    "datasets": "grpo-step runs our side only (--no-trl): TRL needs datasets",
    "ray": "no Ray tests or Ray placement in this campaign",
    "megatron-core": "no megatron engine in this campaign",
    "flash-attn": "varlen attention runs its SDPA path; the flash-attn test skips",
}
# GRPO step shapes: (shape, decoder layers). The full depth of both fits one call on an H100.
GRPO_SHAPES = [("qwen2.5-0.5b", 24), ("qwen2.5-1.5b", 28)]


@dataclass
class Call:
    """One subprocess of the campaign."""

    name: str
    argv: list[str]
    expected_s: int  # expected time on one H100
    timeout_s: int = CALL_LIMIT_S
    env: dict[str, str] = field(default_factory=dict)
    skipped: str | None = None  # the reason, when the call is not made


def have(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def lacking() -> dict[str, str]:
    """What this machine lacks, each with its consequence for the campaign."""
    missing = {
        name: f"{name} is not installed: {why}" for name, why in PEERS.items() if not have(name)
    }
    if shutil.which("nvcc") is None:
        missing["nvcc"] = (
            "nvcc not found: rl-kernels is built without its CUDA module (Triton and C++ CPU paths)"
        )
    return missing


def plan(results: Path, missing: dict[str, str], python: str) -> list[Call]:
    """The calls, each run by `python` (the campaign's virtualenv)."""
    py = python
    files = [str(p.relative_to(ROOT)) for p in gpu_test_files()]
    tests = [py, "-m", "pytest", "-m", "gpu or multigpu", "-ra", "-p", "no:cacheprovider"]
    junit = f"--junitxml={results / 'gpu_tests.xml'}"
    kbench = [py, "-m", "rl.kernels.bench"]
    calls = [
        Call("gpu_tests", [*tests, junit, *files], expected_s=120),
        Call("bench_bucket", [*kbench, "bucket", "--csv", str(results / "bucket.csv")], 30),
    ]
    # BENCHMARKS.md's target shape (T=8192, H=4096, V=131072, bf16) and a Qwen2-7B head
    for t, h, v in ((8192, 4096, 131072), (8192, 3584, 152064)):
        argv = [*kbench, "logprob", "--shape", f"{t},{h},{v}", "--dtype", "bf16"]
        calls.append(
            Call(f"bench_logprob_{t}x{h}x{v}", [*argv, "--csv", str(results / "logprob.csv")], 60)
        )
    calls += [
        Call("bench_varlen", [*kbench, "varlen", "--device", "cuda", "--csv", str(results / "varlen.csv")], 45),
        Call(
            "bench_reshard",
            [py, "-m", "rl.core.bench.reshard", "--model", "llama2-7b", "--layers", "6",
             "--width-scale", "0.5", "--repeats", "7", "--csv", str(results / "reshard.csv")],
            45,
        ),
    ]  # fmt: skip
    engines = "hf,vllm" if "vllm" not in missing else "hf"
    trl = [] if "trl" not in missing and "datasets" not in missing else ["--no-trl"]
    for shape, layers in GRPO_SHAPES:
        argv = [py, "-m", "rl.bench", "grpo-step", "--shape", shape, "--layers", str(layers),
                "--engines", engines, "--rounds", "1", "--steps", "6", "--warmup", "2",
                "--variants", "plain", "--out", str(results / f"grpo_{shape}"), *trl]  # fmt: skip
        calls.append(Call(f"grpo_step_{shape}", argv, expected_s=150))
    return calls


def print_plan(calls: list[Call]) -> None:
    print(
        f"  {'install':<34} ~{INSTALL_S}s (rl-kernels compiled from its sdist), timeout {CALL_LIMIT_S}s"
    )
    for call in calls:
        state = (
            f"skipped: {call.skipped}"
            if call.skipped
            else f"~{call.expected_s}s, timeout {call.timeout_s}s"
        )
        print(f"  {call.name:<34} {state}\n      {shlex.join(call.argv)}")
    made = [c for c in calls if not c.skipped]
    print(
        f"  total: install + {len(made)} calls, expected {(INSTALL_S + sum(c.expected_s for c in made)) / 60:.1f} min "
        f"(budget {BUDGET_S / 60:.0f} min), at most {(CALL_LIMIT_S + sum(c.timeout_s for c in made)) / 60:.0f} min by timeouts"
    )


def plan_problems(calls: list[Call]) -> list[str]:
    problems = [
        f"{c.name}: timeout {c.timeout_s}s over {CALL_LIMIT_S}s"
        for c in calls
        if c.timeout_s > CALL_LIMIT_S
    ]
    expected = INSTALL_S + sum(c.expected_s for c in calls if not c.skipped)
    if expected > BUDGET_S:
        problems.append(f"the calls expect {expected}s, over the {BUDGET_S}s budget")
    return problems


# --- installing from the wheel folder ------------------------------------------------


def pip_install(
    python: str, wheels: Path, *targets: str, env: dict[str, str] | None = None, log: object = None
) -> None:
    """`pip install --no-index --find-links <wheels> --no-deps` into `python`'s environment
    (run by this interpreter's pip, so the target needs none of its own)."""
    argv = [sys.executable, "-m", "pip", "--python", python, "install", "--no-index",
            "--find-links", str(wheels), "--no-deps", "--force-reinstall", "--no-compile",
            "--quiet", "--disable-pip-version-check", *targets]  # fmt: skip
    out = {"stdout": log, "stderr": subprocess.STDOUT} if log is not None else {}
    subprocess.run(argv, check=True, timeout=CALL_LIMIT_S, env={**os.environ, **(env or {})}, **out)  # type: ignore[call-overload]


def kernels_build_env(cuda: bool) -> dict[str, str]:
    env = {"RL_KERNELS_CUDA": "ON" if cuda else "OFF"}
    if cuda:
        import torch

        major, minor = torch.cuda.get_device_capability()
        env["RL_KERNELS_CUDA_ARCHS"] = f"{major}{minor}"  # this box's GPU only: a shorter compile
    return env


def install(python: str, wheels: Path, everything: bool, cuda: bool, log: object = None) -> None:
    """Our wheels (--no-deps) and the rl-kernels sdist; the other wheels of the folder
    only where this environment lacks that distribution (or all of them: `everything`)."""
    files = sorted(wheels.glob("*.whl"))
    ours = [f for f in files if f.name.split("-")[0] in OURS]
    others = [f for f in files if f not in ours and f.name.split("-")[0] not in BUILD_ONLY]
    if not everything:
        others = [f for f in others if not have(f.name.split("-")[0])]
    else:
        others += [f for f in files if f.name.split("-")[0] in BUILD_ONLY]
    if others:
        pip_install(python, wheels, *map(str, others), log=log)
    pip_install(python, wheels, *map(str, ours), log=log)
    (sdist,) = wheels.glob("rl_kernels-*.tar.gz")
    pip_install(python, wheels, str(sdist), env=kernels_build_env(cuda), log=log)


def wheel_modules(wheel: Path) -> list[str]:
    """The importable top-level modules a wheel installs (`rl.<name>` for ours)."""
    names: set[str] = set()
    with zipfile.ZipFile(wheel) as archive:
        for entry in archive.namelist():
            parts = entry.split("/")
            top = parts[0]
            if top.endswith((".dist-info", ".data")) or top.startswith(("_", "__")):
                continue
            if top == "rl" and len(parts) > 2:
                names.add(f"rl.{parts[1]}")
            elif len(parts) > 1 and top.isidentifier():
                names.add(top)
            elif top.endswith(".py") and top[:-3].isidentifier():
                names.add(top[:-3])
    return sorted(names)


def fresh_venv(where: Path) -> str:
    """A virtualenv over the system site-packages, with this environment's site-packages
    behind its own (the box's host packages); returns its python."""
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(where)
    python = where / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    import sysconfig

    host = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site) / "zz_host_packages.pth").write_text("\n".join(sorted(host)) + "\n")
    return str(python)


def dry_run(wheels: Path, calls: list[Call], work: Path) -> list[str]:
    problems = plan_problems(calls)
    files = sorted(wheels.glob("*.whl"))
    if not files or not list(wheels.glob("rl_kernels-*.tar.gz")):
        return [
            *problems,
            f"{wheels} holds no wheels or no rl-kernels sdist: run `nox -s gpu_wheels`",
        ]
    python = fresh_venv(work / "venv")
    try:
        install(python, wheels, everything=True, cuda=False)
    except subprocess.SubprocessError as error:
        return [*problems, f"installing from {wheels} failed: {error}"]
    modules = sorted({m for f in files for m in wheel_modules(f)} | set(OUR_MODULES))
    entries = sorted({c.argv[2] for c in calls if c.argv[1] == "-m"})
    check = (
        "import importlib, importlib.util, json, sys\n"
        "out = {}\n"
        "for name in sys.argv[1].split(','):\n"
        "    try:\n"
        "        out[name] = getattr(importlib.import_module(name), '__file__', None) or 'namespace'\n"
        "    except Exception as e:\n"
        "        out[name] = 'ERROR ' + type(e).__name__ + ': ' + str(e)[:300]\n"
        "for name in sys.argv[2].split(','):\n"
        "    out['entry ' + name] = 'found' if importlib.util.find_spec(name) else 'ERROR not found'\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run(
        [python, "-c", check, ",".join(modules), ",".join(entries)],
        capture_output=True, text=True, timeout=CALL_LIMIT_S, cwd=work,
    )  # fmt: skip
    if done.returncode != 0:
        return [*problems, f"the import check failed: {done.stderr[-2000:]}"]
    venv_root = str((work / "venv").resolve())
    for name, where in json.loads(done.stdout.splitlines()[-1]).items():
        if where.startswith("ERROR"):
            problems.append(f"{name}: {where}")
        elif where not in ("found", "namespace") and not str(Path(where).resolve()).startswith(
            venv_root
        ):
            problems.append(f"{name} imported from {where}, not from the fresh virtualenv")
        else:
            print(f"  ok  {name}")
    return problems


# --- the real run --------------------------------------------------------------------


def environment(missing: dict[str, str]) -> dict[str, object]:
    import torch

    driver = None
    if shutil.which("nvidia-smi"):
        query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
        driver = subprocess.run(query, capture_output=True, text=True).stdout.strip() or None
    nvcc = shutil.which("nvcc")
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "capability": list(torch.cuda.get_device_capability())
        if torch.cuda.is_available()
        else None,
        "cuda_runtime": torch.version.cuda,
        "driver": driver,
        "nvcc": subprocess.run([nvcc, "--version"], capture_output=True, text=True)
        .stdout.strip()
        .splitlines()[-1]
        if nvcc
        else None,
        "python": platform.python_version(),
        "versions": {
            name: have(name)
            for name in (
                "torch",
                "triton",
                "transformers",
                "liger-kernel",
                "vllm",
                "trl",
                "flash-attn",
                "rl-kernels",
                "rl-core",
                "rl-fsdp",
                "rl-megatron",
                "rl-rollout",
                "rl-cli",
            )
        },
        "lacking": missing,
    }


def run_calls(calls: list[Call], results: Path, summary: dict[str, object]) -> int:
    """Each call in turn, its output to `<results>/<name>.log`, under its timeout; its
    record (status: exit code, "skipped" or "timed out after ...", seconds) is added to
    `summary["calls"]` and summary.json rewritten after every call. Returns the failures."""
    summary.setdefault("calls", [])
    failed = 0
    for call in calls:
        record = asdict(call)
        if call.skipped:
            record["status"] = "skipped"
        else:
            print(f"gpu_campaign: {call.name} (timeout {call.timeout_s}s)", flush=True)
            begun = time.monotonic()
            with (results / f"{call.name}.log").open("w") as out:
                try:
                    done = subprocess.run(call.argv, stdout=out, stderr=subprocess.STDOUT, timeout=call.timeout_s,
                                          cwd=ROOT, env={**os.environ, **call.env})  # fmt: skip
                    record["status"] = done.returncode
                except subprocess.TimeoutExpired:
                    record["status"] = f"timed out after {call.timeout_s}s"
            record["seconds"] = round(time.monotonic() - begun, 1)
            failed += record["status"] != 0
        summary["calls"].append(record)  # type: ignore[union-attr]
        (results / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return failed


def run(
    wheels: Path, results: Path, calls: list[Call], missing: dict[str, str], where: Path
) -> int:
    """Install into a fresh virtualenv at `where` (over the box's packages, as the dry run
    does: the box's own environment is left as it is), run the calls, write summary.json."""
    import torch

    if not torch.cuda.is_available():
        print("gpu_campaign: no CUDA device here (use --dry-run on a CPU machine)", file=sys.stderr)
        return 2
    results.mkdir(parents=True, exist_ok=True)
    summary: dict[str, object] = {"environment": None, "calls": []}
    started = time.monotonic()
    python = fresh_venv(where)
    try:
        with (results / "install.log").open("w") as log:
            install(python, wheels, everything=False, cuda="nvcc" not in missing, log=log)
        summary["install"] = {"status": 0, "seconds": round(time.monotonic() - started, 1)}
    except subprocess.SubprocessError as error:
        summary["install"] = {"status": f"failed: {error}"}
    probe = subprocess.run([python, __file__, "--environment"], capture_output=True, text=True)
    try:
        summary["environment"] = json.loads(probe.stdout)
    except json.JSONDecodeError:
        summary["environment"] = f"probe failed: {probe.stderr[-2000:]}"
    failed = run_calls(calls, results, summary)
    print(f"gpu_campaign: {len(calls) - failed}/{len(calls)} calls passed; results in {results}")
    shutil.rmtree(where, ignore_errors=True)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=Path, default=ROOT / "dist" / "gpu-wheels")
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H%M")
    parser.add_argument(
        "--results", type=Path, default=ROOT / "benchmarks" / "results" / "gpu_campaign" / stamp
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="list the calls, check the wheels install"
    )
    parser.add_argument(
        "--work", type=Path, help="--dry-run's scratch folder (default: a temporary one)"
    )
    parser.add_argument("--environment", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    missing = lacking()
    if args.environment:  # run in the campaign's virtualenv: its versions, ours included
        print(json.dumps(environment(missing)))
        return 0
    scratch = tempfile.TemporaryDirectory(prefix="gpu-campaign-")
    work = args.work or (Path(scratch.name) if args.dry_run else args.results)
    calls = plan(args.results, missing, python=str(work / "venv" / "bin" / "python"))
    print(
        f"gpu_campaign: {'dry run, ' if args.dry_run else ''}wheels from {args.wheels}, results to {args.results}"
    )
    for why in missing.values():
        print(f"  lacking: {why}")
    print_plan(calls)
    with scratch:
        if not args.dry_run:
            return run(args.wheels.resolve(), args.results, calls, missing, work / "venv")
        work.mkdir(parents=True, exist_ok=True)
        problems = dry_run(args.wheels.resolve(), calls, work)
    for problem in problems:
        print(f"gpu_campaign: {problem}", file=sys.stderr)
    print(f"gpu_campaign: dry run {'FAILED' if problems else 'passed'}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
