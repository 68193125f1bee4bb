"""An embedding client is the caller's code, so what it returns is input: on every server store that embeds
(Postgres and Redis long-term memory, pgvector, the Postgres history's search by meaning), a wrong answer is
refused with ``InvalidArgument`` and nothing is stored, as the in-memory stores refuse it. Before, a wrong count
or a text leaked ``ValueError`` or ``TypeError``, and a wrong dimension was a ``ConfigurationError``."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from servers import Server

from ravi.capabilities.postgres import PgVectorStore, PostgresHistoryProvider
from ravi.capabilities.postgres.longterm import PgLongTermMemory
from ravi.capabilities.redis.longterm import RedisLongTermMemory
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.messages import ChatMessage
from ravi.kernel.storage import Document

ANSWERS = {
    "too few": lambda n: [],
    "too many": lambda n: [[1.0, 0.0, 0.0, 0.0]] * (n + 1),
    "other dimension": lambda n: [[1.0, 0.0]] * n,
    "text": lambda n: ["0.1 0.2 0.3 0.4"] * n,
    "not numbers": lambda n: [[1.0, "x", 0.0, 0.0]] * n,
    "NaN": lambda n: [[float("nan"), 1.0, 0.0, 0.0]] * n,
    "nothing": lambda n: None,
}


class Wrong:
    """An embedding client of four dimensions that answers ``kind`` wrongly."""

    dimension = 4

    def __init__(self, kind: str) -> None:
        self.kind = kind

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return ANSWERS[self.kind](len(texts))  # type: ignore[no-any-return]


@pytest.mark.parametrize("kind", ANSWERS)
async def test_postgres_long_term_memory_refuses_a_wrong_answer(
    postgres_server: Server, pg_schema: str, kind: str
) -> None:
    memory = PgLongTermMemory(postgres_server.address, schema=pg_schema, embedding_client=Wrong(kind))
    try:
        with pytest.raises(InvalidArgument):
            await memory.save("agent", "invoices are due monthly")
        with pytest.raises(InvalidArgument):
            await memory.search("agent", "invoices")
    finally:
        await memory.close()


@pytest.mark.parametrize("kind", ANSWERS)
async def test_redis_long_term_memory_refuses_a_wrong_answer(
    redis_server: Server, redis_prefix: str, kind: str
) -> None:
    memory = RedisLongTermMemory(redis_server.address, prefix=redis_prefix, embedding_client=Wrong(kind))
    try:
        with pytest.raises(InvalidArgument):
            await memory.save("agent", "invoices are due monthly")
        assert await memory.search("agent", "invoices") == []  # nothing was stored (so nothing is embedded)
    finally:
        await memory.close()


@pytest.mark.parametrize("kind", ANSWERS)
async def test_pgvector_refuses_a_wrong_answer_and_stores_nothing(
    postgres_server: Server, pg_schema: str, kind: str
) -> None:
    store = PgVectorStore(postgres_server.address, schema=pg_schema, embedding_client=Wrong(kind))
    try:
        with pytest.raises(InvalidArgument):
            await store.add([Document(id="d1", text="invoices are due monthly")], collection="c")
        assert await store.get(["d1"], collection="c") == []
    finally:
        await store.close()


@pytest.mark.parametrize("kind", ANSWERS)
async def test_postgres_search_by_meaning_refuses_a_wrong_answer(
    postgres_server: Server, pg_schema: str, kind: str
) -> None:
    history = PostgresHistoryProvider(postgres_server.address, schema=pg_schema)
    try:
        await history.append_many(
            "agent", [ChatMessage.user(f"note {i} on invoices") for i in range(3)], session_id="s"
        )
        with pytest.raises(InvalidArgument):
            await history.search_hybrid(
                "agent", session_id="s", query="invoices", before=10**6, limit=3, embedder=Wrong(kind), model="m"
            )
        assert len(await history.get_messages("agent", session_id="s")) == 3
    finally:
        await history.close()


UNMEASURABLE = {"zero": [0.0] * 4, "past float32": [1e20] * 4, "below float32": [1e-30] * 4}
"""Embeddings float32 arithmetic cannot measure a cosine with: Postgres's long-term memory stored a zero one as
``[1, 0, 0, 0]`` (a direction it never had: it then scored 1.0 against that axis) and failed every search of
a query past float32's range with a score of NaN, while Redis and the in-memory store scored them 0.0."""


class Switching:
    """An embedding client of four dimensions that answers ``answer`` for every text once it is set."""

    dimension = 4

    def __init__(self) -> None:
        self.answer: list[float] | None = None

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.answer or [1.0, 0.5, 0.0, 0.0] for _ in texts]


@pytest.mark.parametrize("kind", UNMEASURABLE)
async def test_long_term_memory_refuses_an_embedding_float32_cannot_measure(
    postgres_server: Server, pg_schema: str, redis_server: Server, redis_prefix: str, kind: str
) -> None:
    client = Switching()
    for memory in (
        PgLongTermMemory(postgres_server.address, schema=pg_schema, embedding_client=client),
        RedisLongTermMemory(redis_server.address, prefix=redis_prefix, embedding_client=client),
    ):
        try:
            client.answer = None
            kept = await memory.save("agent", "kept")
            client.answer = UNMEASURABLE[kind]
            with pytest.raises(InvalidArgument):
                await memory.save("agent", "unmeasurable")
            with pytest.raises(InvalidArgument):
                await memory.search("agent", "unmeasurable")
            client.answer = None
            assert [m.id for m in await memory.search("agent", "kept", limit=5)] == [kept]
        finally:
            await memory.close()
