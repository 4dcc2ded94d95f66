"""What rl-kernels can run here: `python -m rl.kernels.info` (also part of `rl doctor`)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import sys
from typing import Any

from rl.kernels import _backend


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def kernel_report() -> dict[str, Any]:
    """Compiled and usable implementations, with versions; JSON-serialisable."""
    import torch

    cpu = _backend.compiled_module("_C")
    cuda = _backend.compiled_module("_C_cuda")
    triton_installed = importlib.util.find_spec("triton") is not None
    return {
        "rl-kernels": _version("rl-kernels"),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cuda_device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "impls": {
            "reference": {"compiled": True, "usable": True},
            "cpp": {
                "compiled": cpu is not None,
                "usable": cpu is not None,
                "build": cpu.build_info() if cpu is not None else None,
                "error": _backend.compiled_import_error("_C"),
            },
            "cuda": {
                "compiled": cuda is not None,
                "usable": cuda is not None and torch.cuda.is_available(),
                "build": cuda.build_info() if cuda is not None else None,
            },
            "triton": {
                "compiled": triton_installed,
                "usable": _backend.triton_usable(),
                "version": _version("triton"),
            },
        },
    }


def format_report(report: dict[str, Any]) -> str:
    lines = [
        f"rl-kernels {report['rl-kernels']}  torch {report['torch']}  "
        f"CUDA {report['torch_cuda']}  device {report['cuda_device'] or 'none'}"
    ]
    for name, impl in report["impls"].items():
        state = "usable" if impl["usable"] else ("built" if impl["compiled"] else "absent")
        extra = impl.get("build") or impl.get("version") or impl.get("error") or ""
        lines.append(f"  {name:<10} {state:<7} {extra}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    report = kernel_report()
    print(json.dumps(report, indent=2) if "--json" in argv else format_report(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
