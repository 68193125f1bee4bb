"""The ``ravi`` command: watch Ravi assemble windows, and see which backends are installed.

Built on Typer (arguments, help, completion) and Rich (tables, progress), both well-kept and widely used, so
the command behaves like the CLIs people already know.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any

import typer
from rich.console import Console
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
)
from ravi.agents.demo import model_calls
from ravi.agents.tokens import DEFAULT_COUNTER
from ravi.kernel.agent import CompactionStrategy
from ravi.kernel.errors import RaviError
from ravi.kernel.registry import GROUPS, KNOWN_BACKENDS, PROTOCOLS, available, install_hint

app = typer.Typer(help="Ravi: memory for LLM agents.", no_args_is_help=True, add_completion=False)
console = Console()


_SHORT = {
    "ToolResultCompactionStrategy": "tool-result",
    "SelectiveToolCallCompactionStrategy": "selective",
    "TokenBudgetComposedStrategy": "budget",
}


@dataclass
class TurnRow:
    turn: int
    stored_messages: int
    stored_tokens: int
    window_messages: int
    window_tokens: int
    fired: list[str] = field(default_factory=list)
    assembly_ms: float = 0.0


async def _replay(requests: int, budget: int, seed: int, progress: Progress | None) -> list[TurnRow]:
    pipeline: list[CompactionStrategy] = [
        ToolResultCompactionStrategy(max_chars=500),
        SelectiveToolCallCompactionStrategy(keep_recent_groups=5),
        TokenBudgetComposedStrategy([], token_budget=budget),
    ]
    history = InMemoryHistoryProvider()
    context = AgentContext(ContextConfig(history, pipeline), agent_id="demo-agent")
    fired: list[str] = []

    def on_event(event: CompactionEvent) -> None:
        if event.kind == "strategy_applied" and event.changed and event.strategy:
            fired.append(_SHORT.get(event.strategy, event.strategy))

    context.config.pipeline.subscribe(on_event)
    calls = list(model_calls(seed, requests=requests))
    task = progress.add_task("replaying", total=len(calls)) if progress else None
    rows: list[TurnRow] = []
    stored_tokens = 0
    session = "demo-session"
    async with context.run(session, "demo-run") as run:
        for turn, batch in enumerate(calls, start=1):
            *arrived, reply = batch
            await run.add(*arrived)
            stored_tokens += DEFAULT_COUNTER.count_messages(arrived)
            fired.clear()
            start = time.perf_counter()
            window = await run.window()
            elapsed = (time.perf_counter() - start) * 1000
            stored = await history.count_messages("demo-agent", session_id=session)
            rows.append(
                TurnRow(
                    turn,
                    stored,
                    stored_tokens,
                    len(window),
                    DEFAULT_COUNTER.count_messages(window),
                    list(fired),
                    round(elapsed, 3),
                )
            )
            await run.add(reply)  # the model's answer joins the transcript
            stored_tokens += DEFAULT_COUNTER.count_message(reply)
            if progress and task is not None:
                progress.advance(task)
    return rows


@app.command()
def demo(
    requests: Annotated[int, typer.Option(min=1, help="User requests in the replayed conversation.")] = 24,
    budget: Annotated[int, typer.Option(min=100, help="Token budget of each window.")] = 2_000,
    seed: Annotated[int, typer.Option(help="Seed of the generated conversation.")] = 7,
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
) -> None:
    """Replay a bundled agent conversation through Ravi, turn by turn, on the in-memory default.

    Every turn is stored, and before each model call the window is assembled by
    [ToolResultCompaction, SelectiveToolCallCompaction, TokenBudgetComposed].
    """
    with Progress(console=console, transient=True, disable=as_json) as progress:
        rows = asyncio.run(_replay(requests, budget, seed, progress))
    if as_json:
        typer.echo(json.dumps([asdict(r) for r in rows], indent=2))
        return
    table = Table(title=f"Ravi demo: {len(rows)} model calls, window budget {budget:,} tokens")
    for name in ("turn", "stored msgs", "stored tokens", "window msgs", "window tokens", "strategies fired", "ms"):
        table.add_column(name, justify="left" if name == "strategies fired" else "right")
    for r in rows:
        table.add_row(
            str(r.turn),
            str(r.stored_messages),
            f"{r.stored_tokens:,}",
            str(r.window_messages),
            f"{r.window_tokens:,}",
            ", ".join(r.fired) or "-",
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


def main() -> None:
    """Entry point of the ``ravi`` command: Ravi errors print one line and exit with status 1."""
    try:
        app()
    except RaviError as error:
        Console(stderr=True).print(f"[bold red]error:[/] {error}")
        raise SystemExit(1) from None


__all__ = ["app", "main"]
