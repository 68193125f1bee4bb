"""The ``ravi`` command: watch Ravi assemble windows, and see which backends are installed.

Built on Typer (arguments, help, completion) and Rich (tables, progress), both well-kept and widely used, so
the command behaves like the CLIs people already know.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import json
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table

from ravi.agents.context import (
    AgentContext,
    CompactionEvent,
    ContextConfig,
    InMemoryHistoryProvider,
    SelectiveToolCallCompactionStrategy,
    TokenBudgetComposedStrategy,
    ToolResultCompactionStrategy,
    Window,
)
from ravi.agents.demo import model_calls
from ravi.agents.react import ReActAgent, ScriptedModel, Tool
from ravi.agents.settings import build_store, load_settings
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.kernel.agent import CompactionStrategy
from ravi.kernel.errors import ConfigurationError, NotFound, RaviError
from ravi.kernel.messages import ChatMessage
from ravi.kernel.registry import GROUPS, KNOWN_BACKENDS, PROTOCOLS, available, install_hint, load_backend, local_server

# Help texts are plain text: rich markup would eat bracketed names such as "[context] agent_id".
app = typer.Typer(
    help="Ravi: memory for LLM agents.", no_args_is_help=True, add_completion=False, rich_markup_mode=None
)
console = Console()


_SHORT = {  # short enough for an 80-column terminal
    "ToolResultCompactionStrategy": "tool",
    "SelectiveToolCallCompactionStrategy": "fold",
    "TokenBudgetComposedStrategy": "budget",
    "SlidingWindowCompaction": "window",
    "SummarizationCompaction": "summary",
    "RelevantRecallStrategy": "recall",
    "TruncationStrategy": "trunc",
}


def _shown(rows: list[TurnRow], verbose: bool) -> list[TurnRow | None]:
    """The rows to print: all with ``verbose``; else the first and last three and every call where the set of
    strategies that fired changed, with ``None`` standing for the calls left out."""
    if verbose or len(rows) <= 12:
        return list(rows)
    keep = {0, 1, 2, len(rows) - 3, len(rows) - 2, len(rows) - 1}
    keep |= {i for i in range(1, len(rows)) if rows[i].fired != rows[i - 1].fired}
    out: list[TurnRow | None] = []
    for i, row in enumerate(rows):
        if i in keep:
            out.append(row)
        elif out and out[-1] is not None:
            out.append(None)
    return out


@dataclass
class TurnRow:
    turn: int
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


async def _replay(
    config: ContextConfig, requests: int, seed: int, progress: Progress | None, session: str
) -> list[TurnRow]:
    """Run the demo conversation through a ReActAgent (a scripted model and scripted tools), one row per model
    call: what was stored, what the model was sent, which strategies changed the window, how long assembly took."""
    context = AgentContext(config, agent_id=DEMO_AGENT)
    fired: list[str] = []
    timing: list[float] = [0.0, 0.0]

    def on_event(event: CompactionEvent) -> None:
        if event.kind == "pre_compact":
            fired.clear()
            timing[0] = time.perf_counter()
        elif event.kind == "post_compact":
            timing[1] = time.perf_counter()
        elif event.kind == "strategy_applied" and event.changed and event.strategy:
            fired.append(_SHORT.get(event.strategy, event.strategy))

    context.config.pipeline.subscribe(on_event)
    batches = list(model_calls(seed, requests=requests))
    task = progress.add_task("replaying", total=len(batches)) if progress else None
    rows: list[TurnRow] = []
    history = config.history

    async def on_call(window: Sequence[ChatMessage]) -> None:
        stored = await history.get_messages(DEMO_AGENT, session_id=session)
        rows.append(
            TurnRow(
                len(rows) + 1,
                len(stored),
                DEFAULT_COUNTER.count_messages(stored),
                len(window),
                DEFAULT_COUNTER.count_messages(window),
                list(fired),
                round((timing[1] - timing[0]) * 1000, 3),
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


@app.command()
def demo(
    requests: Annotated[int, typer.Option(min=1, help="User requests in the replayed conversation.")] = 24,
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
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
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
    if as_json:
        typer.echo(json.dumps([asdict(r) for r in rows], indent=2))
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
            str(r.turn),
            str(r.stored_messages),
            f"{r.stored_tokens:,}",
            str(r.window_messages),
            f"{r.window_tokens:,}",
            ",".join(r.fired) or "-",
            f"{r.assembly_ms:.2f}",
        )
    console.print(table)
    sent = sum(r.window_tokens for r in rows)
    whole = sum(r.stored_tokens for r in rows)
    saved = whole - sent
    console.print(
        f"Sent {sent:,} tokens over {len(rows)} calls instead of {whole:,} "
        f"([bold green]{saved:,} saved, {saved / whole:.0%}[/]); "
        f"assembly took {sum(r.assembly_ms for r in rows):.1f} ms in all. The stored transcript is untouched: "
        f"{rows[-1].stored_messages + 1} messages."
    )
    if config is not None:
        console.print(
            f"Stored as session {session} of agent {DEMO_AGENT}; inspect it with:\n"
            f"  ravi history show {session} --agent {DEMO_AGENT} --config {config}",
            markup=False,
        )
    else:
        console.print(
            f"Session {session} lived in {'memory' if backend == 'memory' else 'a server removed after the demo'}; "
            "run with --config ravi.toml to keep it and inspect it with `ravi history`.",
            markup=False,
        )


@app.command()
def backends(as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False) -> None:
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


history_app = typer.Typer(
    help="Inspect a stored session (from the configured history backend).", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(history_app, name="history")

ConfigOption = Annotated[Path | None, typer.Option("--config", help="ravi.toml to read (default: ./ravi.toml).")]
AgentOption = Annotated[str | None, typer.Option("--agent", help="Agent id (default: [context] agent_id).")]


async def _stored(session: str, config: Path | None, agent: str | None) -> tuple[list[ChatMessage], str]:
    settings = load_settings(config)
    history = build_store("history", settings)
    agent_id = agent or settings.context.agent_id
    try:
        messages = await history.get_messages(agent_id, session_id=session)
        if not messages:
            raise NotFound(
                f"agent {agent_id!r} has no session {session!r}", hint=await _known_sessions(history, agent_id)
            )
        return messages, agent_id
    finally:
        closer = getattr(history, "close", None)
        if closer is not None:
            await closer()


async def _known_sessions(history: Any, agent_id: str) -> str:
    """What to say about the sessions that do exist."""
    lister = getattr(history, "list_sessions", None)
    if lister is None:
        return "check the session id, and --agent (default: [context] agent_id)"
    try:
        known = await lister(agent_id, limit=21)
    except NotImplementedError:
        return "check the session id, and --agent (default: [context] agent_id)"
    if not known:
        return f"agent {agent_id!r} has no sessions here; check --agent (default: [context] agent_id) and --config"
    more = ", ..." if len(known) > 20 else ""
    return f"its sessions: {', '.join(known[:20])}{more}"


def _preview(message: ChatMessage, width: int = 70) -> str:
    if message.role == "tool" and message.tool_result is not None:
        text = ("ERROR " if message.tool_result.is_error else "") + message.tool_result.content
    else:
        text = message.text or " ".join(f"{c.name}({json.dumps(dict(c.arguments))})" for c in message.tool_calls)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


@history_app.command("list")
def history_list(
    session: str,
    config: ConfigOption = None,
    agent: AgentOption = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
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
    table = Table(
        title=f"session {session!r} of agent {agent_id!r}: {len(messages)} messages, "
        f"{DEFAULT_COUNTER.count_messages(messages):,} tokens"
    )
    for name in ("#", "role", "tokens", "content"):
        table.add_column(name, justify="right" if name in ("#", "tokens") else "left")
    for i, m in enumerate(messages):
        table.add_row(str(i), m.role, str(DEFAULT_COUNTER.count_message(m)), _preview(m))
    console.print(table)


@history_app.command("show")
def history_show(session: str, config: ConfigOption = None, agent: AgentOption = None) -> None:
    """Every stored message in full."""
    messages, _ = asyncio.run(_stored(session, config, agent))
    for i, m in enumerate(messages):
        console.rule(f"#{i} {m.role} ({m.id})")
        console.print(json.dumps(m.to_openai(extras=False), indent=2, ensure_ascii=False), markup=False)


@history_app.command("export")
def history_export(session: str, config: ConfigOption = None, agent: AgentOption = None) -> None:
    """The session as JSON lines of OpenAI-style dicts (lossless: ids, metadata, timestamps included)."""
    messages, _ = asyncio.run(_stored(session, config, agent))
    for m in messages:
        typer.echo(json.dumps(m.to_openai(), ensure_ascii=False))


@app.command()
def window(
    session: str,
    budget: Annotated[int | None, typer.Option(help="Assemble within this many tokens.")] = None,
    model: Annotated[str | None, typer.Option(help="Assemble for this model's window (from the model table).")] = None,
    config: ConfigOption = None,
    agent: AgentOption = None,
    explain: Annotated[bool, typer.Option("--explain", help="Say what happened to every stored message.")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """The window Ravi would send for SESSION now, with token counts (--budget or --model override the
    configured pipeline)."""
    if budget is not None and model is not None:
        raise ConfigurationError("give --budget or --model, not both")
    settings = load_settings(config)
    if budget is not None:
        settings.context.pipeline = None
        settings.context.model, settings.context.token_budget = None, budget
    elif model is not None:
        settings.context.pipeline = None
        settings.context.model, settings.context.token_budget = model, None
    context_config = ContextConfig.from_settings(settings)
    agent_id = agent or settings.context.agent_id

    async def assemble() -> tuple[list[ChatMessage], Window, float]:
        try:
            stored = await context_config.history.get_messages(agent_id, session_id=session)
            if not stored:
                hint = await _known_sessions(context_config.history, agent_id)
                raise NotFound(f"agent {agent_id!r} has no session {session!r}", hint=hint)
            model = context_config.model
            factor = await context_config.calibration.factor(model) if model else 1.0
            return stored, await AgentContext(context_config, agent_id=agent_id).explain(session), factor
        finally:
            for store in (context_config.history, context_config.calibration.state):
                closer = getattr(store, "close", None)
                if closer is not None:
                    result = closer()
                    if asyncio.iscoroutine(result):
                        await result

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
        table = Table(title=f"manifest of {session!r}: {counts}; {sizes}")
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
                e.strategy or "",
                detail.strip(),
                _preview(by_id[e.message_id], 40),
            )
        console.print(table)
        return
    table = Table(
        title=f"window for {session!r}: {len(messages)} of {len(stored)} messages, "
        f"{window_tokens:,} of {counter.count_messages(stored):,} tokens ({sizes})"
    )
    for name in ("role", "tokens", "content"):
        table.add_column(name, justify="right" if name == "tokens" else "left")
    for m in messages:
        table.add_row(m.role, str(counter.count_message(m)), _preview(m))
    console.print(table)


def describe_counter(counter: Any) -> str:
    """How a counter counts, in a few words."""
    from ravi.agents.tokens import ConservativeTokenCounter, ExactTokenCounter, HeuristicTokenCounter

    if isinstance(counter, ExactTokenCounter):
        return f"exact {counter.encoding}"
    if isinstance(counter, ConservativeTokenCounter):
        return "the conservative estimate" + (f" x{counter.scale:g}" if counter.scale != 1.0 else "")
    if isinstance(counter, HeuristicTokenCounter):
        return "the heuristic (chars / 4)"
    return type(counter).__name__


@app.command()
def conformance(
    specs: Annotated[
        list[str],
        typer.Argument(help="KIND or KIND=NAME, for example history or history=postgres (repeatable)."),
    ],
    isolate: Annotated[
        list[str] | None,
        typer.Option(
            help="KIND=OPTION: a fresh value of that option for every test, e.g. history=schema (repeatable)."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Run the conformance suite against registered backends and print a contract-by-contract report.

    The backend and its options come from the configuration: the [KIND] table of ravi.toml and RAVI_<KIND>__<KEY>
    variables (RAVI_HISTORY__DSN=...); NAME overrides the configured backend. Ravi's persistent backends give
    every test a scope of its own, dropped afterwards (postgres: schema, redis: prefix, s3: key_prefix,
    age: graph); --isolate names that option for other backends.
    """
    try:
        import pytest
    except ImportError:
        raise ConfigurationError(
            "the conformance suite is not installed", hint="pip install ravi-conformance"
        ) from None
    from ravi.conformance.plugin import backend_options

    for spec in specs:  # one clear error for malformed options, before any test runs
        backend_options(spec.split("=", 1)[0])
    results: list[dict[str, str]] = []

    class Collect:
        def pytest_runtest_logreport(self, report: Any) -> None:
            if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
                parts = report.nodeid.split("::")
                contract = parts[-2] if len(parts) >= 2 else "?"
                test = parts[-1]
                reason = ""
                if report.skipped and isinstance(report.longrepr, tuple):
                    reason = str(report.longrepr[2])
                elif report.failed:
                    reason = str(getattr(report.longrepr, "reprcrash", "") or report.longrepr).splitlines()[-1][:160]
                results.append({"contract": contract, "test": test, "outcome": report.outcome, "reason": reason})

    with tempfile.TemporaryDirectory(prefix="ravi-conformance-") as root:
        # A configuration of its own: the project's pytest settings (addopts, plugins) are not the suite's.
        ini = Path(root) / "pytest.ini"
        ini.write_text("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
        args = ["-c", str(ini), "--rootdir", root, "-p", "no:cacheprovider", "-p", "no:terminal"]
        for spec in specs:
            args += ["--ravi-backend", spec]
        for spec in isolate or []:
            args += ["--ravi-isolate", spec]
        code = pytest.main([*args, "--pyargs", "ravi.conformance.run"], plugins=[Collect()])
    if code not in (0, 1) or not results:
        raise ConfigurationError(
            f"the conformance suite did not run (pytest exit code {int(code)}): no contract test was executed",
            hint="check the KIND=NAME arguments and the [KIND] tables of ravi.toml; `ravi backends` lists what is "
            "installed",
        )
    if as_json:
        typer.echo(json.dumps(results, indent=2))
    else:
        table = Table(title=f"conformance: {', '.join(specs)}")
        for name in ("contract", "test", "outcome", "reason"):
            table.add_column(name)
        style = {"passed": "green", "failed": "red", "skipped": "yellow"}
        for r in results:
            table.add_row(r["contract"], r["test"], f"[{style.get(r['outcome'], '')}]{r['outcome']}[/]", r["reason"])
        console.print(table)
        counts = {k: sum(1 for r in results if r["outcome"] == k) for k in ("passed", "failed", "skipped")}
        console.print(", ".join(f"{v} {k}" for k, v in counts.items()))
    if code not in (0, 5) or any(r["outcome"] == "failed" for r in results):
        raise typer.Exit(1)


def main() -> None:
    """Entry point of the ``ravi`` command: Ravi errors print one line and exit with status 1."""
    try:
        app()
    except RaviError as error:
        Console(stderr=True, soft_wrap=True).print(f"[bold red]error:[/] {escape(str(error))}")
        raise SystemExit(1) from None


__all__ = ["app", "main"]
