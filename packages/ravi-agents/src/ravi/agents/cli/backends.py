"""``ravi backends``: each store kind with the backend the configuration gives it, its installed backends, and what to
install for the others."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.table import Table

from ravi.agents.cli._common import ConfigOption, JsonOption, console
from ravi.agents.settings import load_settings
from ravi.kernel.registry import GROUPS, KNOWN_BACKENDS, PROTOCOLS, available, install_command, install_hint


def backends(config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """List each store kind with the backend it is configured with (ravi.toml and RAVI_* variables), its installed
    backends, and what to install for the others."""
    settings = load_settings(config)
    report: dict[str, dict[str, Any]] = {}
    for kind in GROUPS:
        installed = available(kind)
        missing = {
            name: install_hint(kind, name)
            for name in KNOWN_BACKENDS
            if name not in installed and install_hint(kind, name)
        }
        report[kind] = {
            "protocol": PROTOCOLS[kind],
            "configured": settings.store(kind).backend,
            "installed": installed,
            "install": missing,
        }
    if as_json:
        typer.echo(json.dumps(report, indent=2))
        return
    table = Table(title="Ravi backends")
    for name in ("kind", "protocol", "configured", "installed", "not installed (distribution)"):
        table.add_column(name, overflow="fold")  # a cut name ("ravi-capabili…") says nothing to install
    for kind, row in report.items():
        configured = row["configured"]
        table.add_row(
            kind,
            str(row["protocol"]),
            configured if configured in row["installed"] else f"{configured} (not installed)",
            ", ".join(row["installed"]) or "-",
            ", ".join(f"{n} ({d})" for n, d in row["install"].items()) or "-",
        )
    console.print(table)
    if any(row["install"] for row in report.values()):
        console.print(f"to install a distribution: {install_command('DISTRIBUTION')}", markup=False, soft_wrap=True)
