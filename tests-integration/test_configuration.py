"""The promise of configuration: the same agent code runs on memory and on Postgres, only ravi.toml changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from servers import Server

from ravi.agents.context import AgentContext, ContextConfig
from ravi.agents.demo import model_calls
from ravi.kernel.errors import NotFound
from ravi.kernel.messages import ChatMessage


async def agent_code(config_path: Path) -> tuple[list[list[str]], type]:
    """An agent loop that knows nothing of backends: it reads its configuration and runs."""
    config = ContextConfig.from_settings(path=config_path)
    context = AgentContext(config, agent_id="support")
    windows = []
    async with context.run("session-1", "run-1") as run:
        for batch in list(model_calls(3, requests=3)):
            *arrived, reply = batch
            await run.add(*arrived)
            windows.append([m.id for m in await run.window()])
            await run.add(reply)
    await run.add(ChatMessage.user("after the run"))
    kind = type(config.history)
    closer = getattr(config.history, "close", None)
    if closer is not None:
        await closer()
    return windows, kind


async def test_same_code_on_memory_and_on_postgres(tmp_path: Path, postgres_server: Server, pg_schema: str) -> None:
    pipeline = "[context]\ntoken_budget = 1500\n"
    memory = tmp_path / "memory.toml"
    memory.write_text(pipeline)
    postgres = tmp_path / "postgres.toml"
    postgres.write_text(
        f'[history]\nbackend = "postgres"\ndsn = "{postgres_server.address}"\nschema = "{pg_schema}"\n\n{pipeline}'
    )
    on_memory, memory_kind = await agent_code(memory)
    on_postgres, postgres_kind = await agent_code(postgres)
    assert memory_kind.__name__ == "InMemoryHistoryProvider"
    assert postgres_kind.__name__ == "PostgresHistoryProvider"
    assert on_memory == on_postgres  # the same windows, message for message
    assert len(on_memory) > 5


@pytest.mark.parametrize("backend", ["postgres", "redis"])
def test_the_demo_runs_on_a_server_started_on_the_fly(backend: str) -> None:
    from typer.testing import CliRunner

    from ravi.agents.cli import app

    result = CliRunner().invoke(app, ["demo", "--requests", "2", "--backend", backend, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["calls"][0]["call"] == 1


def test_window_and_history_commands_read_the_configured_postgres(
    tmp_path: Path, postgres_server: Server, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio
    import json

    from typer.testing import CliRunner

    from ravi.agents.cli import app
    from ravi.capabilities.postgres import PostgresHistoryProvider

    messages = [ChatMessage.user(f"turn {i} " + "x" * 200) for i in range(10)]

    async def store() -> None:  # the CLI runs its own event loop, so this test has none
        history = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)
        await history.append_many("bot", messages, session_id="s")
        await history.close()

    asyncio.run(store())
    (tmp_path / "ravi.toml").write_text(
        f'[history]\nbackend = "postgres"\ndsn = "{postgres_server.address}"\nschema = "{pg_schema}"\n\n'
        '[context]\nagent_id = "bot"\ntoken_budget = 300\n'
    )
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    result = runner.invoke(app, ["window", "s", "--explain", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert [e["message_id"] for e in payload["manifest"]] == [m.id for m in messages]
    assert {e["status"] for e in payload["manifest"]} == {"kept", "dropped"}
    assert payload["window_tokens"] <= 300
    assert (payload["counter"], payload["calibration"]) == ("the heuristic (chars / 4)", 1.0)
    for_model = runner.invoke(app, ["window", "s", "--model", "gpt-4o", "--json"])
    assert json.loads(for_model.output)["counter"] == "exact o200k_base"  # the model's own encoding
    exported = runner.invoke(app, ["history", "export", "s"])
    assert [json.loads(line)["id"] for line in exported.output.splitlines()] == [m.id for m in messages]
    unknown = runner.invoke(app, ["history", "list", "nope"])  # a typo: exit 1, naming the sessions there are
    assert unknown.exit_code != 0
    assert isinstance(unknown.exception, NotFound) and "its sessions: s" in str(unknown.exception)
    assert isinstance(runner.invoke(app, ["window", "nope"]).exception, NotFound)


def test_ravi_window_reads_the_session_once(
    tmp_path: Path, postgres_server: Server, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ravi window`` used to read the session twice (once for the table, once for the window): the store's
    calls, as telemetry sees them, are one read of the messages, beside one of the session's generation (which
    every window read whole makes, decision 96)."""
    import asyncio

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from typer.testing import CliRunner

    from ravi.agents import telemetry
    from ravi.agents.cli import app
    from ravi.capabilities.postgres import PostgresHistoryProvider

    async def store() -> None:
        history = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)
        await history.append_many("bot", [ChatMessage.user(f"turn {i}") for i in range(6)], session_id="s")
        await history.aclose()

    asyncio.run(store())
    (tmp_path / "ravi.toml").write_text(
        f'[history]\nbackend = "postgres"\ndsn = "{postgres_server.address}"\nschema = "{pg_schema}"\n\n'
        '[context]\nagent_id = "bot"\ntoken_budget = 300\n'
    )
    monkeypatch.chdir(tmp_path)
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    telemetry.enable(tracer_provider=provider)
    try:
        for args in (["window", "s", "--json"], ["window", "s", "--explain", "--json"]):
            spans.clear()
            result = CliRunner().invoke(app, args)
            assert result.exit_code == 0, result.output
            reads = [s.name for s in spans.get_finished_spans() if s.attributes.get("db.collection.name") == "history"]
            assert sorted(reads) == ["generation history", "get_messages history"], reads
    finally:
        telemetry.disable()


async def test_stores_close_every_store_they_built_once(
    postgres_server: Server, pg_schema: str, redis_server: Server, redis_prefix: str
) -> None:
    """``Stores.from_settings()`` opened connection pools and gave no way to close them: the ``ravi`` command and
    the tests each closed the stores one by one. It closes, as ``ContextConfig`` does, with ``aclose`` or as an
    async context manager: every store it built, once (the history is the summary store too), and only those."""
    import asyncio

    from ravi.agents.settings import RaviSettings, Stores
    from ravi.capabilities.postgres._db import _SHARED

    settings = RaviSettings.model_validate(
        {
            "history": {"backend": "postgres", "dsn": postgres_server.address, "schema": pg_schema},
            "state": {"backend": "redis", "url": redis_server.address, "prefix": redis_prefix},
        }
    )
    loop = asyncio.get_running_loop()

    def open_pools() -> list[object]:
        return [key for key, shared in _SHARED.items() if key[0] is loop and shared.pool is not None]

    async with Stores.from_settings(settings) as stores:
        await stores.history.append("agent", ChatMessage.user("kept"), session_id="s")
        await stores.state.set_state("s", {"k": 1})
        assert stores.summaries is stores.history
        assert open_pools()
    assert not open_pools()
    await stores.aclose()  # safe to call again
    async with Stores.from_settings(settings) as again:  # what was stored stays
        assert [m.text for m in await again.history.get_messages("agent", session_id="s")] == ["kept"]
        assert await again.state.get_state("s") == {"k": 1}
