"""``ravi export``: write an agent's sessions (or one) as JSON Lines, losslessly, for ``ravi import``."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated, TextIO

import typer

from ravi.agents.cli._common import ConfigOption, close_store, count_of, known_sessions
from ravi.agents.forget import ALL_SESSIONS
from ravi.agents.settings import build_store, load_settings
from ravi.kernel.errors import InvalidArgument, NotFound
from ravi.kernel.storage import SessionLister
from ravi.kernel.storage.transfer import export_session


async def _export(agent: str, session: str | None, config: Path | None, out: TextIO) -> int:
    history = build_store("history", load_settings(config))
    try:
        if session is not None:
            sessions = [session]
        elif isinstance(history, SessionLister):
            sessions = await history.list_sessions(agent, limit=ALL_SESSIONS)
        else:
            raise InvalidArgument(
                f"{type(history).__name__} cannot list an agent's sessions", hint="name one with --session"
            )
        written = 0
        for name in sessions:
            lines = await export_session(history, agent, name)
            if not lines and session is not None:
                raise NotFound(f"agent {agent!r} has no session {name!r}", hint=await known_sessions(history, agent))
            for line in lines:
                out.write(line + "\n")
            written += len(lines)
        return written
    finally:
        await close_store(history)


def export(
    agent: Annotated[str, typer.Argument(help="The agent whose sessions are written.")],
    session: Annotated[
        str | None, typer.Option("--session", help="Write only this session (default: every one of the agent).")
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file (default: standard output).")
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Write the agent's sessions (or one) as JSON Lines, one message a line with its session and run id, in
    order, losslessly: every content block, name, metadata and timestamp. Read it back into any configured
    backend with ravi import, for example: ravi export alice --config redis.toml | ravi import - --config
    postgres.toml."""
    if output is None:
        written = asyncio.run(_export(agent, session, config, sys.stdout))
    else:
        try:
            out = output.open("w", encoding="utf-8")
        except OSError as error:
            raise InvalidArgument(f"cannot write {str(output)!r}: {error.strerror}") from None
        with out:
            written = asyncio.run(_export(agent, session, config, out))
    typer.echo(f"exported {count_of(written, 'message')}", err=True)


__all__ = ["export"]
