"""``ravi history``: inspect a stored session of the configured history backend."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import typer
from rich.table import Table

from ravi.agents.cli._common import (
    AgentOption,
    ConfigOption,
    JsonOption,
    close_store,
    console,
    count_of,
    known_sessions,
    plain,
    preview,
    shown,
)
from ravi.agents.settings import build_store, load_settings
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.kernel.errors import NotFound
from ravi.kernel.messages import ChatMessage

history_app = typer.Typer(
    help="Inspect a stored session (from the configured history backend).", no_args_is_help=True, rich_markup_mode=None
)


async def _stored(session: str, config: Path | None, agent: str | None) -> tuple[list[ChatMessage], str]:
    settings = load_settings(config)
    history = build_store("history", settings)
    agent_id = settings.context.agent_id if agent is None else agent
    try:
        messages = await history.get_messages(agent_id, session_id=session)
        if not messages:
            raise NotFound(
                f"agent {agent_id!r} has no session {session!r}", hint=await known_sessions(history, agent_id)
            )
        return messages, agent_id
    finally:
        await close_store(history)


@history_app.command("list")
def history_list(
    session: str,
    config: ConfigOption = None,
    agent: AgentOption = None,
    as_json: JsonOption = False,
) -> None:
    """One line per stored message: position, role, tokens, a preview."""
    messages, agent_id = asyncio.run(_stored(session, config, agent))
    if as_json:
        typer.echo(
            json.dumps(
                [
                    {"index": i, "id": m.id, "role": m.role, "tokens": DEFAULT_COUNTER.count_message(m)}
                    for i, m in enumerate(messages)
                ],
                indent=2,
            )
        )
        return
    title = (
        f"session {session!r} of agent {agent_id!r}: {count_of(len(messages), 'message')}, "
        f"{DEFAULT_COUNTER.count_messages(messages):,} tokens"
    )
    # a title wraps at the table's width: a table of short messages is made as wide as its title (or the console)
    table = Table(title=plain(title), min_width=min(len(title), console.width))
    for name in ("#", "role", "tokens", "content"):
        table.add_column(name, justify="right" if name in ("#", "tokens") else "left")
    for i, m in enumerate(messages):
        table.add_row(str(i), m.role, str(DEFAULT_COUNTER.count_message(m)), plain(preview(m)))
    console.print(table)


@history_app.command("show")
def history_show(session: str, config: ConfigOption = None, agent: AgentOption = None) -> None:
    """Every stored message in full: its timestamp, metadata, thinking blocks and tool errors included."""
    messages, _ = asyncio.run(_stored(session, config, agent))
    for i, m in enumerate(messages):
        console.rule(plain(f"#{i} {m.role} ({m.id})"))
        stored = m.to_openai()  # every field, as history export writes it; the id is in the rule above
        del stored["id"]
        body = json.dumps(stored, indent=2, ensure_ascii=False)
        console.print(shown(body, keep="\n"), markup=False)


@history_app.command("export")
def history_export(session: str, config: ConfigOption = None, agent: AgentOption = None) -> None:
    """The session as JSON lines of OpenAI-style dicts (ids, metadata, timestamps; no run ids: ravi export moves
    sessions between backends)."""
    messages, _ = asyncio.run(_stored(session, config, agent))
    for m in messages:
        typer.echo(shown(json.dumps(m.to_openai(), ensure_ascii=False), as_json=True))
