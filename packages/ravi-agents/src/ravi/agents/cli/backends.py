"""``ravi backends``: each store kind with its installed backends, and what to install for the others."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.table import Table

from ravi.agents.cli._common import JsonOption, console
from ravi.kernel.registry import GROUPS, KNOWN_BACKENDS, PROTOCOLS, available, install_hint


def backends(as_json: JsonOption = False) -> None:
    """List each store kind with its installed backends and what to install for the others."""
    report: dict[str, dict[str, Any]] = {}
    for kind in GROUPS:
        installed = available(kind)
        missing = {
            name: install_hint(kind, name)
            for name in KNOWN_BACKENDS
            if name not in installed and install_hint(kind, name)
        }
        report[kind] = {"protocol": PROTOCOLS[kind], "installed": installed, "install": missing}
    if as_json:
        typer.echo(json.dumps(report, indent=2))
        return
    table = Table(title="Ravi backends")
    for name in ("kind", "protocol", "installed", "not installed (pip install ...)"):
        table.add_column(name)
    for kind, row in report.items():
        table.add_row(
            kind,
            str(row["protocol"]),
            ", ".join(row["installed"]) or "-",
            ", ".join(f"{n} ({d})" for n, d in row["install"].items()) or "-",
        )
    console.print(table)
