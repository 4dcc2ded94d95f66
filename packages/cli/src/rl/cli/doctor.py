"""`rl doctor`: what this machine can run (torch, CUDA, kernels, engines, config dialects,
third-party)."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import asdict
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:
    from rl.core.doctor import Check


def dialect_checks() -> list[Check]:
    """Which other systems' configs `rl convert` / `rl train --from` take here."""
    from rl.cli.dialects import DIALECTS, IMPLEMENTED
    from rl.core.doctor import Check

    checks = []
    for dialect in DIALECTS:
        if dialect not in IMPLEMENTED:
            checks.append(Check(f"dialect: {dialect}", False, "detected, not converted yet"))
            continue
        hydra = importlib.util.find_spec("hydra") is not None
        detail = "config files and launch scripts" if hydra else "needs hydra-core"
        if dialect == "verl" and importlib.util.find_spec("verl") is None:
            detail += "; verl's built-in configs need verl installed (files read only)"
        checks.append(Check(f"dialect: {dialect}", hydra, detail))
    return checks


def doctor(
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Report the environment: torch/CUDA, compiled kernels, installed engines, extras."""
    from rl.core.doctor import collect

    report = collect({"config dialects": dialect_checks()})
    if as_json:
        typer.echo(json.dumps({k: [asdict(c) for c in v] for k, v in report.items()}, indent=2))
        return
    table = Table(title="rl doctor", show_lines=False)
    table.add_column("section", style="bold")
    table.add_column("check")
    table.add_column("", justify="center")
    table.add_column("detail", overflow="fold")
    for section, checks in report.items():
        for index, check in enumerate(checks):
            mark = "[green]✓[/]" if check.ok else "[yellow]–[/]"
            table.add_row(section if index == 0 else "", check.name, mark, escape(check.detail))
    Console().print(table)
