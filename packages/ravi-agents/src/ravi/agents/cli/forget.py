"""``ravi forget``: erase an agent, or one of its sessions, from every configured store (a privacy request)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ravi.agents.cli._common import ConfigOption, JsonOption, console, known_sessions, plain, shown
from ravi.agents.forget import ForgetReport
from ravi.agents.settings import Stores, load_settings
from ravi.kernel.storage import check_forget


async def _forget(agent: str, session: str | None, config: Path | None) -> tuple[ForgetReport, str | None]:
    """The report, and when no store held anything under the scope, what to say of the agent's sessions (a
    mistyped id erases nothing)."""
    stores = Stores.from_settings(load_settings(config))
    try:
        report = await stores.forget(agent, session_id=session)
        hint = None if any(report.removed.values()) else await known_sessions(stores.history, agent)
        return report, hint
    finally:
        await stores.aclose()


def forget(
    agent: Annotated[str, typer.Argument(help="The agent id whose data is erased.")],
    session: Annotated[
        str | None, typer.Option("--session", help="Erase only this session of the agent (default: every one).")
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Erase an agent (or one session) from every configured store: the history and everything derived from it,
    session state, long-term memory, vector documents, graph entities, blobs and task lists under the scope
    (see docs/privacy.md). Running it again finishes a run that stopped halfway. When no store held anything
    under the scope it says so, naming the agent's sessions, and exits 0: there is nothing left to erase. Exits
    with status 2 when a store cannot forget (it is named in the report)."""
    check_forget(agent, session)  # an id no store takes is refused before the user is asked to erase it
    what = f"session {session!r} of agent {agent!r}" if session is not None else f"every session of agent {agent!r}"
    if not yes:
        typer.confirm(f"Erase {what} from every configured store? This cannot be undone.", abort=True)
    report, nothing = asyncio.run(_forget(agent, session, config))
    if nothing is not None and report.complete:
        typer.echo(f"nothing was stored for {what} ({nothing})", err=True)
    if as_json:
        typer.echo(shown(json.dumps(report.as_dict(), indent=2, ensure_ascii=False), keep="\n", as_json=True))
    else:
        table = Table(title=plain(f"forgot {what}"))
        table.add_column("store")
        table.add_column("removed", justify="right")
        for kind, count in report.removed.items():
            table.add_row(kind, f"{count:,}")
        for kind, why in report.not_covered.items():
            table.add_row(kind, plain(f"not covered: {why}"))
        console.print(table)
    if not report.complete:
        raise typer.Exit(2)


__all__ = ["forget"]
