"""`rl doctor`: what this machine can run (torch, CUDA, kernels, engines, third-party)."""

from __future__ import annotations

import json
from dataclasses import asdict

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table


def doctor(
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Report the environment: torch/CUDA, compiled kernels, installed engines, extras."""
    from rl.core.doctor import collect

    report = collect()
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
