"""``Stores.forget`` and ``ravi forget`` on real servers: a session written to every store (history on Postgres or
Redis with its summaries, terms and embeddings; session state; long-term memory; pgvector documents and relevant
recall's collections; AGE entities; S3 blobs; task lists) is found by no read path afterwards, of this process's
stores or of a second set of stores that had read it first, while the agent's other session and the same session
id under another agent are untouched."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from servers import Server

from ravi.agents.forget import recall_collections
from ravi.agents.settings import RaviSettings, Stores
from ravi.kernel.embeddings import HashingEmbeddingClient
from ravi.kernel.errors import BackendUnavailable, NotFound
from ravi.kernel.messages import ChatMessage, ToolCallBlock
from ravi.kernel.registry import GROUPS
from ravi.kernel.scope import Scope
from ravi.kernel.storage import Document, Entity, blob_prefix

EMBEDDER = HashingEmbeddingClient()


def transcript() -> list[ChatMessage]:
    """A conversation whose ids every session shares (ids are unique per session only)."""
    call = ToolCallBlock(id="c1", name="lookup", arguments={"account": "4711"})
    return [
        ChatMessage.system("be brief", id="0"),
        ChatMessage.user("my zebra account is 4711", id="1"),
        ChatMessage.assistant(tool_calls=[call], id="2"),
        ChatMessage.tool("c1", "zebra account 4711: open", id="3"),
        ChatMessage.assistant("your zebra account is open", id="4"),
    ]


def settings_for(flavour: str, postgres: Server, redis: Server, s3: Server, age_dsn: str) -> RaviSettings:
    """Every store on a server, with a schema, a key prefix, a graph and a bucket of their own."""
    tag = uuid.uuid4().hex[:12]
    pg = {"backend": "postgres", "dsn": postgres.address, "schema": f"forget_{tag}"}
    rd = {"backend": "redis", "url": redis.address, "prefix": f"f{tag}"}
    assert s3.credentials is not None
    stores: dict[str, Any] = {
        "vector": pg,
        "tasks": pg,
        "graph": {"backend": "age", "dsn": age_dsn, "graph": f"g_{tag}"},
        "blob": {
            "backend": "s3",
            "bucket": f"t-{tag}",
            "endpoint_url": s3.address,
            "access_key": s3.credentials[0],
            "secret_key": s3.credentials[1],
            "addressing_style": "path",
            "create_bucket": True,
        },
    }
    if flavour == "postgres":
        stores |= {"history": pg, "state": pg, "longterm": pg}
    else:  # Redis, with the summaries in a separately configured Postgres store
        stores |= {"history": rd, "state": rd, "longterm": rd, "summaries": pg}
    return RaviSettings(**stores)


@pytest.fixture(params=["postgres", "redis"])
def settings(
    request: pytest.FixtureRequest, postgres_server: Server, redis_server: Server, s3_server: Server, age_dsn: str
) -> RaviSettings:
    return settings_for(request.param, postgres_server, redis_server, s3_server, age_dsn)


@pytest_asyncio.fixture
async def pair(settings: RaviSettings) -> AsyncIterator[tuple[Stores, Stores]]:
    """Two sets of stores on the same servers, as two processes would have them."""
    first, second = Stores(settings), Stores(settings)
    try:
        yield first, second
    finally:
        await first.aclose()
        await second.aclose()


async def write_everywhere(stores: Stores, agent: str, session: str) -> None:
    history = stores.history
    await history.append_many(agent, transcript(), session_id=session, run_id="r")
    generation = await history.generation(agent, session_id=session)
    assert await stores.summaries.put_summary(Scope(agent, session, generation), "span", "zebra account 4711")
    if hasattr(history, "search_units"):  # terms written back (Postgres)
        await history.search_units(agent, session_id=session, query="zebra", before=10**9, limit=5)
    if hasattr(history, "search_hybrid"):  # embeddings kept beside the transcript (Postgres)
        await history.search_hybrid(
            agent, session_id=session, query="zebra", before=10**9, limit=5, embedder=EMBEDDER, model="hash"
        )
    for collection in recall_collections(agent, session):
        await stores.vector.upsert(
            [Document(id="u", content="zebra 4711", embedding=(1.0, 0.0))], collection=collection
        )
    await stores.state.set_state(session, {"account": "4711"})
    await stores.longterm.save(agent, "owns zebra account 4711", metadata={"session_id": session})
    scope = {"agent_id": agent, "session_id": session}
    await stores.vector.upsert(
        [Document(id=f"{agent}/{session}", content="zebra 4711", embedding=(1.0, 0.0), metadata=scope)],
        collection="documents",
    )
    await stores.graph.add_entities([Entity(id=f"{agent}/{session}", label="Account", properties=scope)])
    await stores.blob.upload(blob_prefix(agent, session) + "statement.txt", b"zebra 4711")
    await stores.tasks.create_task_list(session, agent, ["close account 4711"])


async def found(stores: Stores, agent: str, session: str, generation: str) -> dict[str, Any]:
    """Everything any read path gives of the session (empty values when nothing is left)."""
    history = stores.history
    window = await history.read_window(agent, session_id=session, tokens=10**6)
    out: dict[str, Any] = {
        "messages": await history.get_messages(agent, session_id=session),
        "window": window.messages,
        "summary": await stores.summaries.get_summary(Scope(agent, session, generation), "span"),
        "longterm": [
            m
            for m in await stores.longterm.search(agent, "zebra account", limit=10)
            if m.metadata["session_id"] == session
        ],
        "documents": await stores.vector.get([f"{agent}/{session}"], collection="documents"),
        "entity": await stores.graph.get_entity(f"{agent}/{session}"),
        "tasks": await stores.tasks.get_task_list(session, agent),
        "collections": set(recall_collections(agent, session)) & set(await stores.vector.list_collections()),
    }
    if hasattr(history, "search_units"):
        out["search"] = await history.search_units(agent, session_id=session, query="zebra", before=10**9, limit=5)
    if hasattr(history, "search_hybrid"):
        hybrid = await history.search_hybrid(
            agent, session_id=session, query="zebra", before=10**9, limit=5, embedder=EMBEDDER, model="hash"
        )
        out["hybrid"] = hybrid.lexical + hybrid.meaning
    try:
        out["blob"] = (await stores.blob.download(blob_prefix(agent, session) + "statement.txt")).data
    except NotFound:
        out["blob"] = None
    return out


async def leftovers(stores: Stores, agent: str, session: str) -> int:
    """Records of the session left in the history's own tables or keys (read paths aside): messages, the
    session's record, summaries and embeddings on Postgres; any key of the session on Redis."""
    history = stores.history
    db = getattr(history, "db", None)
    if db is not None:
        count = 0
        for table in ("messages", "sessions", "session_summaries", "embeddings", "embedded"):
            count += await db.fetchval(
                f"SELECT count(*) FROM {db.table(table)} WHERE agent_id = $1 AND session_id = $2", agent, session
            )
        return int(count)
    return sum([int(await history.redis.client.exists(key)) for key in history._keys(agent, session)])


def empty(values: dict[str, Any]) -> list[str]:
    """The read paths that still returned something."""
    return [name for name, value in values.items() if value]


async def test_forget_a_session_leaves_nothing_of_it_and_nothing_else_is_touched(pair: tuple[Stores, Stores]) -> None:
    first, second = pair
    a, b = f"agent-{uuid.uuid4().hex[:8]}", f"agent-{uuid.uuid4().hex[:8]}"
    s, other = "s|1", "s*2"
    for agent, session in ((a, s), (a, other), (b, s)):
        await write_everywhere(first, agent, session)
    generation = await first.history.generation(a, session_id=s)
    before = await found(second, a, s, generation)  # the second set of stores reads (and caches) it first
    assert not [name for name, value in before.items() if not value], "the session was not written everywhere"

    report = await first.forget(a, session_id=s)
    assert report.complete, report.not_covered
    assert report.removed["history"] == len(transcript())
    for kind in ("longterm", "vector", "graph", "blob", "tasks"):
        assert report.removed[kind] >= 1, (kind, report.removed)
    assert report.removed["recall"] == 3

    for stores in (first, second):
        assert empty(await found(stores, a, s, generation)) == [], "a read path still finds the forgotten session"
        assert await stores.history.generation(a, session_id=s) == ""
    assert await leftovers(first, a, s) == 0
    assert await leftovers(first, a, other) > 0
    assert await first.state.get_state(s) == {}
    if first.summaries is first.history:  # beside the transcript, checked against the session's generation
        assert not await first.summaries.put_summary(Scope(a, s, generation), "late", "zebra"), "a late summary kept"
    for agent, session in ((a, other), (b, s)):
        kept = await found(second, agent, session, await first.history.generation(agent, session_id=session))
        assert not [name for name, value in kept.items() if not value], (agent, session)
        assert [m.id for m in kept["messages"]] == [m.id for m in transcript()]

    again = await first.forget(a, session_id=s)
    assert not any(count for kind, count in again.removed.items() if kind != "state"), again.removed

    everything = await first.forget(a)
    assert everything.sessions == (other,)
    assert everything.removed["history"] == len(transcript())
    assert empty(await found(second, a, other, "")) == []
    assert [m.id for m in await second.history.get_messages(b, session_id=s)] == [m.id for m in transcript()]


async def test_a_forget_that_stopped_halfway_is_finished_by_running_it_again(
    pair: tuple[Stores, Stores], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, _ = pair
    a = f"agent-{uuid.uuid4().hex[:8]}"
    for session in ("s1", "s2"):
        await write_everywhere(first, a, session)

    async def down(*args: Any, **kwargs: Any) -> int:
        raise BackendUnavailable("the graph server went away")

    monkeypatch.setattr(first.graph, "forget", down)
    with pytest.raises(BackendUnavailable):
        await first.forget(a)
    assert await first.history.list_sessions(a) == ["s1", "s2"], "the history went before the stores after it"
    monkeypatch.undo()
    report = await first.forget(a)
    assert report.complete and report.sessions == ("s1", "s2")
    assert report.removed["graph"] == 2
    for session in ("s1", "s2"):
        assert empty(await found(first, a, session, "")) == []


def test_ravi_forget_erases_through_the_configuration(
    postgres_server: Server, redis_server: Server, s3_server: Server, age_dsn: str, tmp_path: Any
) -> None:
    """``ravi forget AGENT --session ID --yes --json`` with a ravi.toml that names the servers."""
    import asyncio

    from typer.testing import CliRunner

    from ravi.agents.cli import app

    settings = settings_for("postgres", postgres_server, redis_server, s3_server, age_dsn)
    lines = []
    for kind in GROUPS:
        section = getattr(settings, kind, None)
        if section is not None and kind != "summaries":
            lines.append(f"[{kind}]")
            lines += [
                f"{key} = {json.dumps(value)}"
                for key, value in {"backend": section.backend, **section.options()}.items()
            ]
    config = tmp_path / "ravi.toml"
    config.write_text("\n".join(lines) + "\n")
    a = f"agent-{uuid.uuid4().hex[:8]}"

    async def write() -> None:
        stores = Stores(settings)
        try:
            await write_everywhere(stores, a, "s")
        finally:
            await stores.aclose()

    asyncio.run(write())
    runner = CliRunner()
    refused = runner.invoke(app, ["forget", a, "--session", "s", "--config", str(config)], input="n\n")
    assert refused.exit_code == 1  # not confirmed: nothing done
    mistyped = runner.invoke(app, ["forget", a, "--session", "s-typo", "--yes", "--json", "--config", str(config)])
    assert mistyped.exit_code == 0 and json.loads(mistyped.stdout)["complete"]  # nothing there: nothing to erase
    assert "nothing was stored for session 's-typo'" in mistyped.stderr and "its sessions: s" in mistyped.stderr
    done = runner.invoke(app, ["forget", a, "--session", "s", "--yes", "--json", "--config", str(config)])
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert "nothing was stored" not in done.stderr
    assert report["complete"] and report["removed"]["history"] == len(transcript())

    async def left() -> list[str]:
        stores = Stores(settings)
        try:
            return empty(await found(stores, a, "s", ""))
        finally:
            await stores.aclose()

    assert asyncio.run(left()) == []
