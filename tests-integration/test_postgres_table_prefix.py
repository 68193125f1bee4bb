"""A table prefix the Postgres stores accept gives working tables: PostgreSQL cuts every name past 63 bytes, so a
long prefix made two of a store's names one (a collection's table and its index) or named a constraint that
PostgreSQL had named otherwise, and the store failed on first use with a bare error."""

from __future__ import annotations

from typing import Any

import pytest
from servers import Server

from ravi.capabilities.postgres import (
    PgLongTermMemory,
    PgTaskStore,
    PgVectorStore,
    PostgresHistoryProvider,
    PostgresMemoryStore,
    PostgresSummaryStore,
)
from ravi.kernel.errors import ConfigurationError
from ravi.kernel.messages import ChatMessage
from ravi.kernel.scope import Scope
from ravi.kernel.storage import Document

STORES = [
    PostgresHistoryProvider,
    PostgresMemoryStore,
    PgVectorStore,
    PgLongTermMemory,
    PgTaskStore,
    PostgresSummaryStore,
]


async def use(store: Any) -> None:
    """One write and one read through ``store``, so that every table, index and constraint it needs is made."""
    if isinstance(store, PostgresHistoryProvider):
        await store.append("a", ChatMessage.user("hello"), session_id="s")
        assert [m.text for m in await store.get_messages("a", session_id="s")] == ["hello"]
    elif isinstance(store, PostgresMemoryStore):
        assert await store.update_state("s", {"k": 1}) == {"k": 1}
    elif isinstance(store, PgVectorStore):
        await store.upsert([Document(id="d", content="x", embedding=(1.0, 0.0))], collection="c")
        assert [r.id for r in await store.search([1.0, 0.0], collection="c")] == ["d"]
    elif isinstance(store, PgLongTermMemory):
        memory_id = await store.save("a", "a fact")
        assert (await store.get("a", memory_id)) is not None
    elif isinstance(store, PgTaskStore):
        board = await store.create_task_list("c", "a", ["t"])
        assert await store.get_task_list("c", "a") == board
    else:
        assert await store.put_summary(Scope("a", "s", "g"), "span", "text") in (True, False)


@pytest.mark.parametrize("store_type", STORES, ids=lambda t: t.__name__)
async def test_every_table_prefix_a_store_accepts_works(
    store_type: type, postgres_server: Server, pg_schema: str
) -> None:
    """Each length a store accepts for ``table_prefix`` gives a store that works; a longer one is refused with
    ``ConfigurationError`` when the store is built."""
    accepted = 0
    for length in range(1, 64):
        prefix = "p" * length
        try:
            store = store_type(postgres_server.address, schema=pg_schema, table_prefix=prefix)
        except ConfigurationError:
            continue
        accepted = length
        try:
            await use(store)
        finally:
            await store.aclose()
    assert accepted >= 16, "a prefix of 16 characters is refused"
