"""``ravi window``: the window Ravi would send for a session now, and why."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from typing import Annotated, Any

import typer
from rich.table import Table

from ravi.agents.cli._common import (
    AgentOption,
    ConfigOption,
    JsonOption,
    console,
    count_of,
    describe_counter,
    known_sessions,
    plain,
    preview,
)
from ravi.agents.context import ContextConfig, Window, WindowRequest
from ravi.agents.settings import load_settings
from ravi.kernel.errors import ConfigurationError, NotFound
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage import SessionGeneration


def _known_model(name: str) -> None:
    """Refuse a model Ravi cannot size, with what to type instead (the library's hint names a Python call)."""
    from ravi.agents.context.models import MODELS, model_info
    from ravi.kernel.registry import did_you_mean

    try:
        model_info(name)
    except ConfigurationError as error:
        raise ConfigurationError(
            error.message,
            hint=f"{did_you_mean(name, MODELS)}give the budget in tokens with --budget N, or a model of the table: "
            f"{', '.join(sorted(MODELS)[:8])}, ...",
        ) from None


def window(
    session: str,
    budget: Annotated[int | None, typer.Option(min=1, help="Assemble within this many tokens (at least 1).")] = None,
    model: Annotated[str | None, typer.Option(help="Assemble for this model's window (from the model table).")] = None,
    config: ConfigOption = None,
    agent: AgentOption = None,
    explain: Annotated[bool, typer.Option("--explain", help="Say what happened to every stored message.")] = False,
    as_json: JsonOption = False,
) -> None:
    """The window Ravi would send for SESSION now, with token counts (--budget or --model override the
    configured pipeline)."""
    if budget is not None and model is not None:
        raise ConfigurationError("give --budget or --model, not both")
    settings = load_settings(config)
    if budget is not None:
        settings.context.pipeline = None
        settings.context.token_budget = budget  # counted as the configured model, if any, counts
    elif model is not None:
        _known_model(model)
        settings.context.pipeline = None
        settings.context.model, settings.context.token_budget = model, None
    context_config = ContextConfig.from_settings(settings)
    agent_id = settings.context.agent_id if agent is None else agent

    async def assemble() -> tuple[list[ChatMessage], Window, float]:
        async with context_config:  # closes the stores it opened
            history = context_config.history
            # the generation first, as every window reads it: a clear landing after it leaves the messages read
            # filed under the generation they belong to, never the new one
            generation = (
                await history.generation(agent_id, session_id=session)
                if isinstance(history, SessionGeneration)
                else None
            )
            # one read: the stored messages are what the table shows, and what the window is assembled from
            stored = await history.get_messages(agent_id, session_id=session)
            if not stored:
                hint = await known_sessions(context_config.history, agent_id)
                raise NotFound(f"agent {agent_id!r} has no session {session!r}", hint=hint)
            model = context_config.model
            factor = await context_config.calibration.factor(model) if model else 1.0
            request = WindowRequest(
                agent_id,
                session,
                history=history,
                messages=stored,
                calibration=factor,
                explain=True,
                generation=generation,
            )
            return stored, await context_config.pipeline.window(request), factor

    stored, explained, factor = asyncio.run(assemble())
    messages = explained.messages
    counter = context_config.pipeline.window_counter()
    window_tokens = counter.count_messages(messages)
    sizes = f"counted with {describe_counter(counter)}: {window_tokens:,} tokens"
    if factor > 1.0:
        sizes += f"; the provider reported {factor:.2f}x, about {int(window_tokens * factor):,}"
    if as_json:
        payload: dict[str, Any] = {
            "stored_messages": len(stored),
            "stored_tokens": counter.count_messages(stored),
            "window_tokens": window_tokens,
            "counter": describe_counter(counter),
            "calibration": factor,
            "window": [m.to_openai(extras=False) for m in messages],
        }
        if explain:
            payload["manifest"] = [asdict(e) for e in explained.manifest]
        typer.echo(json.dumps(payload, indent=2))
        return
    if explain:
        by_id = {m.id: m for m in stored}
        counts = ", ".join(f"{v} {k}" for k, v in explained.counts().items())
        table = Table(title=plain(f"manifest of {session!r}: {counts}; {sizes}"))
        for name in ("#", "role", "status", "by", "detail", "content"):
            table.add_column(name)
        style = {"kept": "green", "truncated": "yellow", "summarised": "cyan", "recalled": "magenta", "dropped": "red"}
        for i, e in enumerate(explained.manifest):
            detail = (f"-{e.chars_removed:,} chars" if e.chars_removed else "") + (
                f" into {e.summary_id}" if e.summary_id else ""
            )
            table.add_row(
                str(i),
                by_id[e.message_id].role,
                f"[{style[e.status]}]{e.status}[/]",
                plain(e.strategy or ""),
                plain(detail.strip()),
                plain(preview(by_id[e.message_id], 40)),
            )
        console.print(table)
        return
    table = Table(
        title=plain(
            f"window for {session!r}: {len(messages)} of {count_of(len(stored), 'message')}, "
            f"{window_tokens:,} of {counter.count_messages(stored):,} tokens ({sizes})"
        )
    )
    for name in ("role", "tokens", "content"):
        table.add_column(name, justify="right" if name == "tokens" else "left")
    for m in messages:
        table.add_row(m.role, str(counter.count_message(m)), plain(preview(m)))
    console.print(table)
