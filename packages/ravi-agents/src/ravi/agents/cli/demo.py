"""``ravi demo``: replay a bundled agent conversation through Ravi and show, per model call, what assembly did."""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import json
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from ravi.agents.cli._common import JsonOption, console, count_of
from ravi.agents.context import (
    AgentContext,
    CompactionEvent,
    ContextConfig,
    InMemoryHistoryProvider,
    SelectiveToolCallCompactionStrategy,
    TokenBudgetComposedStrategy,
    ToolResultCompactionStrategy,
)
from ravi.agents.demo import model_calls
from ravi.agents.react import ReActAgent, ScriptedModel, Tool
from ravi.agents.settings import load_settings
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.kernel.agent import CompactionStrategy
from ravi.kernel.errors import ConfigurationError
from ravi.kernel.llm import TokenCounter
from ravi.kernel.messages import ChatMessage
from ravi.kernel.registry import available, load_backend, local_server

_SHORT = {  # short enough for an 80-column terminal
    "ToolResultCompactionStrategy": "tool",
    "SelectiveToolCallCompactionStrategy": "fold",
    "TokenBudgetComposedStrategy": "budget",
    "SlidingWindowCompaction": "window",
    "SummarizationCompaction": "summary",
    "RelevantRecallStrategy": "recall",
    "TruncationStrategy": "trunc",
}


MAX_REQUESTS = 1_000
"""The most user requests ``ravi demo`` replays: the conversation is generated whole before it is replayed, and
each call assembles a window over the history stored so far (1,000 requests are about 3,800 model calls)."""


def _shown(rows: list[CallRow], verbose: bool) -> list[CallRow | None]:
    """The rows to print: all with ``verbose``; else the first and last three and every call where the set of
    strategies that fired changed, with ``None`` standing for the calls left out."""
    if verbose or len(rows) <= 12:
        return list(rows)
    keep = {0, 1, 2, len(rows) - 3, len(rows) - 2, len(rows) - 1}
    keep |= {i for i in range(1, len(rows)) if rows[i].fired != rows[i - 1].fired}
    out: list[CallRow | None] = []
    for i, row in enumerate(rows):
        if i in keep:
            out.append(row)
        elif out and out[-1] is not None:
            out.append(None)
    return out


@dataclass
class CallRow:
    call: int
    stored_messages: int
    stored_tokens: int
    window_messages: int
    window_tokens: int
    fired: list[str] = field(default_factory=list)
    assembly_ms: float = 0.0


def _demo_pipeline(budget: int) -> list[CompactionStrategy]:
    return [
        ToolResultCompactionStrategy(max_chars=500),
        SelectiveToolCallCompactionStrategy(keep_recent_groups=5),
        TokenBudgetComposedStrategy([], token_budget=budget),
    ]


DEMO_AGENT = "demo-agent"


class _ToolFailure(Exception):
    """A scripted tool's failure: the transcript's error output."""


def _scripted_agent(
    context: AgentContext, batches: list[list[ChatMessage]], on_call: Callable[[Sequence[ChatMessage]], Any]
) -> tuple[ReActAgent, list[ChatMessage]]:
    """A ReActAgent on a scripted model that replays ``batches`` (the generated conversation): the model gives
    the transcript's replies, the tools its outputs. Returns the agent and the user turns to send it."""
    replies = [batch[-1] for batch in batches]
    arrived = [m for batch in batches for m in batch[:-1]]
    users = [m for m in arrived if m.role in ("system", "user")]
    outputs: dict[str, list[ChatMessage]] = {}
    calls = {c.id: c.name for reply in replies for c in reply.tool_calls}
    for m in arrived:
        if m.tool_result is not None:
            outputs.setdefault(calls[m.tool_result.tool_call_id], []).append(m)

    def tool(name: str) -> Tool:
        def run(**_: Any) -> str:
            result = outputs[name].pop(0).tool_result
            assert result is not None
            if result.is_error:
                raise _ToolFailure(result.content)
            return result.content

        return Tool(name, f"the demo's {name}", run)

    class Model(ScriptedModel):
        async def respond(self, messages: Sequence[ChatMessage], *, tools: Sequence[Tool]) -> ChatMessage:
            await on_call(messages)
            return await super().respond(messages, tools=tools)

    agent = ReActAgent(DEMO_AGENT, model=Model(replies), context=context, tools=[tool(n) for n in outputs])
    return agent, users


class _TimedContext(AgentContext):
    """An ``AgentContext`` that keeps how long its last window took to assemble, reads from the store included."""

    took = 0.0

    async def get_prompt_window(self, session_id: str, *, counter: TokenCounter | None = None) -> list[ChatMessage]:
        start = time.perf_counter()
        try:
            return await super().get_prompt_window(session_id, counter=counter)
        finally:
            self.took = time.perf_counter() - start


async def _replay(
    config: ContextConfig, requests: int, seed: int, progress: Progress | None, session: str
) -> list[CallRow]:
    """Run the demo conversation through a ReActAgent (a scripted model and scripted tools), one row per model
    call: what was stored, what the model was sent, which strategies changed the window, how long assembly took
    (the whole ``get_prompt_window`` call, store reads included)."""
    context = _TimedContext(config, agent_id=DEMO_AGENT)
    fired: list[str] = []

    def on_event(event: CompactionEvent) -> None:
        if event.kind == "pre_compact":
            fired.clear()
        elif event.kind == "strategy_applied" and event.changed and event.strategy:
            fired.append(_SHORT.get(event.strategy, event.strategy))

    context.config.pipeline.subscribe(on_event)
    batches = list(model_calls(seed, requests=requests))
    task = progress.add_task("replaying", total=len(batches)) if progress else None
    rows: list[CallRow] = []
    history = config.history

    async def on_call(window: Sequence[ChatMessage]) -> None:
        stored = await history.get_messages(DEMO_AGENT, session_id=session)
        rows.append(
            CallRow(
                len(rows) + 1,
                len(stored),
                DEFAULT_COUNTER.count_messages(stored),
                len(window),
                DEFAULT_COUNTER.count_messages(window),
                list(fired),
                round(context.took * 1000, 3),
            )
        )
        if progress and task is not None:
            progress.advance(task)

    agent, turns = _scripted_agent(context, batches, on_call)
    try:
        for turn in turns:
            if turn.role == "system":
                await context.add_message(session, turn, run_id="demo-run")
            else:
                await agent.run(session, turn, run_id="demo-run")
    finally:
        closer = getattr(history, "aclose", None)
        if closer is not None:
            await closer()
    return rows


def _local_servers() -> set[str]:
    """The names of the throwaway servers the installed capabilities offer."""
    from importlib.metadata import entry_points

    from ravi.kernel.registry import LOCAL_SERVERS

    return {ep.name for ep in entry_points(group=LOCAL_SERVERS)}


@contextlib.contextmanager
def _demo_config(backend: str, config_path: Path | None, budget: int | None) -> Iterator[tuple[ContextConfig, str]]:
    """The configuration the demo runs on, and a line saying where its history lives and what the window is."""
    if config_path is not None:
        settings = load_settings(config_path)
        if budget is not None:  # --budget replaces the configured pipeline, as for `ravi window`
            settings.context.pipeline = None
            settings.context.model, settings.context.token_budget = None, budget
            window = f"window budget {budget:,} tokens"
        else:
            window = f"the pipeline {config_path} names"
        where = f"history: {settings.history.backend} (from {config_path})"
        yield ContextConfig.from_settings(settings), f"{window}, {where}"
        return
    budget = 2_000 if budget is None else budget
    choices = ["memory", *sorted(set(available("history")) & _local_servers() - {"memory"})]
    if backend not in choices:
        close = difflib.get_close_matches(backend, choices, n=1)
        raise ConfigurationError(
            f"--backend {backend!r} is not a history backend the demo can start",
            hint=(f"did you mean {close[0]!r}? " if close else "")
            + f"choose one of: {', '.join(choices)}, or run on a ravi.toml with --config",
        )
    if backend == "memory":
        yield (
            ContextConfig(InMemoryHistoryProvider(), _demo_pipeline(budget)),
            f"window budget {budget:,} tokens, history: in memory",
        )
        return
    server = local_server(backend)
    Console(stderr=True).print(f"starting a local {backend} server for the demo ...", style="dim")
    server.start()
    try:
        history = load_backend("history", backend, **server.backend_options())
        where = f"window budget {budget:,} tokens, history: {backend} (a local server, removed after)"
        yield ContextConfig(history, _demo_pipeline(budget)), where
    finally:
        server.stop()


def demo(
    requests: Annotated[
        int,
        typer.Option(
            min=1, max=MAX_REQUESTS, help=f"User requests in the replayed conversation (at most {MAX_REQUESTS:,})."
        ),
    ] = 24,
    budget: Annotated[
        int | None,
        typer.Option(
            min=100, help="Token budget of each window (default 2,000; with --config, replaces its pipeline)."
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the generated conversation.")] = 7,
    backend: Annotated[
        str,
        typer.Option(
            help="Where history lives: memory, or a backend with a local server (postgres, redis) started on the fly."
        ),
    ] = "memory",
    config: Annotated[Path | None, typer.Option("--config", help="Run on what this ravi.toml names instead.")] = None,
    as_json: JsonOption = False,
    verbose: Annotated[bool, typer.Option("--verbose", help="Print every model call, not a summary.")] = False,
) -> None:
    """Replay a bundled agent conversation through Ravi: a ReActAgent on a scripted model and scripted tools.

    Every turn is stored, and before each model call the window is assembled by ToolResultCompaction (tool),
    SelectiveToolCallCompaction (fold) and TokenBudgetComposed (budget), or the pipeline --config names. The
    table shows, per call, the stored messages and tokens, the window's, and the strategies that changed it.
    """
    with (
        _demo_config(backend, config, budget) as (context_config, where),
        Progress(console=console, transient=True, disable=as_json) as progress,
    ):
        session = f"demo-{uuid.uuid4().hex[:8]}"
        rows = asyncio.run(_replay(context_config, requests, seed, progress, session))
    sent = sum(r.window_tokens for r in rows)
    whole = sum(r.stored_tokens for r in rows)
    saved = whole - sent
    assembly_ms = sum(r.assembly_ms for r in rows)
    kept = config is not None
    if as_json:
        totals = {
            "calls": len(rows),
            "sent_tokens": sent,
            "whole_tokens": whole,
            "saved_tokens": saved,
            "saved_share": round(saved / whole, 4) if whole else 0.0,
            "assembly_ms": round(assembly_ms, 3),
            "stored_messages": rows[-1].stored_messages + 1 if rows else 0,
        }
        where_json = {"where": where, "agent_id": DEMO_AGENT, "session_id": session, "kept": kept}
        typer.echo(json.dumps({**where_json, "totals": totals, "calls": [asdict(r) for r in rows]}, indent=2))
        return
    shown = _shown(rows, verbose)
    table = Table(
        title=f"Ravi demo: {len(rows)} model calls, {where}",
        caption="... marks calls like their neighbours; --verbose shows every call" if None in shown else None,
    )
    for name in ("call", "stored", "tokens", "window", "tokens", "fired", "ms"):
        table.add_column(name, justify="left" if name == "fired" else "right", no_wrap=True)
    for r in shown:
        if r is None:
            table.add_row("...", "", "", "", "", "", "")
            continue
        table.add_row(
            str(r.call),
            str(r.stored_messages),
            f"{r.stored_tokens:,}",
            str(r.window_messages),
            f"{r.window_tokens:,}",
            ",".join(r.fired) or "-",
            f"{r.assembly_ms:.2f}",
        )
    console.print(table)
    console.print(
        f"Sent {sent:,} tokens over {len(rows)} calls instead of {whole:,} "
        f"([bold green]{saved:,} saved, {saved / whole:.0%}[/]); "
        f"assembly took {assembly_ms:.1f} ms in all. The stored transcript is untouched: "
        f"{count_of(rows[-1].stored_messages + 1, 'message')}."
    )
    if kept:
        console.print(
            f"Stored as session {session} of agent {DEMO_AGENT}; inspect it with:\n"
            f"  ravi history show {session} --agent {DEMO_AGENT} --config {config}",
            markup=False,
        )
    else:
        console.print(
            f"Session {session} lived in {'memory' if backend == 'memory' else 'a server removed after the demo'}; "
            "to keep it, run `ravi demo --config FILE` with a ravi.toml that names a store (`ravi dev postgres` "
            "prints one), then inspect it with `ravi history`.",
            markup=False,
        )
