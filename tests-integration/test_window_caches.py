"""Windows of one process while another process changes the same session, and agents that share session and
message ids, on Postgres and Redis: a window never holds a removed message or another agent's, never misses one
appended before the read."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest
from pausing_index import PausingBM25
from servers import Server, closing

from ravi.agents.context import (
    AgentContext,
    ContextConfig,
    RelevantRecallStrategy,
    SummarizingContext,
    TokenBudgetComposedStrategy,
)
from ravi.agents.context.functional import CompactionPolicy, PolicyCompactionStrategy
from ravi.agents.context.recall_index import BM25Index, EmbeddingIndex
from ravi.agents.forget import recall_collections
from ravi.capabilities.postgres import PgVectorStore, PostgresHistoryProvider, PostgresSummaryStore
from ravi.capabilities.redis import RedisHistoryProvider, RedisSummaryStore
from ravi.conformance._base import eventually
from ravi.kernel.embeddings import HashingEmbeddingClient
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.messages import ChatMessage


def texts(window: list[ChatMessage]) -> list[str]:
    return [m.text for m in window]


def on_postgres(server: Server, schema: str) -> Callable[..., Any]:
    return lambda: PostgresHistoryProvider(server.address, schema=schema)


def on_redis(server: Server, prefix: str, **options: Any) -> Callable[..., Any]:
    return lambda: RedisHistoryProvider(server.address, prefix=prefix, **options)


async def as_two_processes(store: Callable[[], Any], body: Callable[[Any, Any], Awaitable[None]]) -> None:
    """``body(mine, theirs)`` with two store objects, each standing for a process (own caches, own client)."""
    async for mine in closing(store()):
        async for theirs in closing(store()):
            await body(mine, theirs)


async def test_postgres_windows_follow_another_processs_changes(postgres_server: Server, pg_schema: str) -> None:
    await as_two_processes(on_postgres(postgres_server, pg_schema), follows)


async def test_redis_windows_follow_another_processs_changes(redis_server: Server, redis_prefix: str) -> None:
    await as_two_processes(on_redis(redis_server, redis_prefix), follows)


async def follows(mine: Any, theirs: Any) -> None:
    context = AgentContext(ContextConfig(mine, [TokenBudgetComposedStrategy(token_budget=100_000)]))
    await context.add_messages("s", [ChatMessage.user("one"), ChatMessage.assistant("two")])
    assert texts(await context.get_prompt_window("s")) == ["one", "two"]

    newest = (await theirs.get_messages("agent", session_id="s"))[-1]
    assert await theirs.replace_last(
        "agent", session_id="s", message_id=newest.id, messages=[ChatMessage.assistant("two, corrected")]
    )
    assert texts(await context.get_prompt_window("s")) == ["one", "two, corrected"]

    await theirs.append("agent", ChatMessage.user("three"), session_id="s")
    assert texts(await context.get_prompt_window("s")) == ["one", "two, corrected", "three"]

    await theirs.clear("agent", session_id="s")
    assert texts(await context.get_prompt_window("s")) == []
    await theirs.append_many(
        "agent", [ChatMessage.user("a"), ChatMessage.user("b"), ChatMessage.user("c")], session_id="s"
    )
    assert texts(await context.get_prompt_window("s")) == ["a", "b", "c"]

    await theirs.forget("agent", session_id="s")
    assert texts(await context.get_prompt_window("s")) == []
    await theirs.append_many("agent", [ChatMessage.user("x"), ChatMessage.user("y")], session_id="s")
    assert texts(await context.get_prompt_window("s")) == ["x", "y"]


def transcript(secret: str) -> list[ChatMessage]:
    """A long session whose first turn holds ``secret``; the same ids every time it is written."""
    first = ChatMessage.user(f"my invoice {secret} shows the wrong amount", id="m-0")
    rest = [ChatMessage.user(f"filler turn {i} about the weather and nothing else", id=f"m-{i}") for i in range(1, 40)]
    return [first, *rest, ChatMessage.user("what was wrong with my invoice?", id="m-40")]


async def recalls_nothing_removed(mine: Any, theirs: Any) -> None:
    context = AgentContext(ContextConfig(mine, [RelevantRecallStrategy(token_budget=400, recall_share=0.5)]))
    await theirs.append_many("agent", transcript("INV-2291"), session_id="s")
    assert "INV-2291" in " ".join(texts(await context.get_prompt_window("s")))  # recalled, so cached

    await theirs.clear("agent", session_id="s")
    await theirs.append_many("agent", transcript("INV-7777"), session_id="s")  # same ids, other text
    window = " ".join(texts(await context.get_prompt_window("s")))
    assert "INV-2291" not in window
    assert "INV-7777" in window


async def test_postgres_recall_holds_nothing_of_a_cleared_session(postgres_server: Server, pg_schema: str) -> None:
    await as_two_processes(on_postgres(postgres_server, pg_schema), recalls_nothing_removed)


async def test_redis_recall_holds_nothing_of_a_cleared_session(redis_server: Server, redis_prefix: str) -> None:
    await as_two_processes(on_redis(redis_server, redis_prefix), recalls_nothing_removed)


HELD = {
    "cache": lambda: RelevantRecallStrategy(token_budget=400, recall_share=0.5, prefer="cache"),
    "bm25 cache": lambda: RelevantRecallStrategy(400, recall_share=0.5, prefer="cache", index=BM25Index()),
}


def holds_nothing_removed(strategy: str, explain: bool) -> Callable[[Any, Any], Awaitable[None]]:
    """A window (or an explained one) of a process that holds a recall (a cache-stable one: its units are kept
    between windows) after the other process cleared the session and wrote it again under the same ids."""

    async def body(mine: Any, theirs: Any) -> None:
        context = AgentContext(ContextConfig(mine, [HELD[strategy]()]))

        async def window() -> str:
            if explain:
                return " ".join(texts((await context.explain("s")).messages))
            return " ".join(texts(await context.get_prompt_window("s")))

        await theirs.append_many("agent", transcript("INV-2291"), session_id="s")
        assert "INV-2291" in await window()  # recalled, and held

        await theirs.clear("agent", session_id="s")
        await theirs.append_many("agent", transcript("INV-7777"), session_id="s")  # same ids and sizes
        shown = await window()
        assert "INV-2291" not in shown
        assert "INV-7777" in shown

    return body


@pytest.mark.parametrize("explain", [False, True], ids=["window", "explain"])
@pytest.mark.parametrize("strategy", list(HELD))
async def test_postgres_held_recall_holds_nothing_of_a_cleared_session(
    postgres_server: Server, pg_schema: str, strategy: str, explain: bool
) -> None:
    await as_two_processes(on_postgres(postgres_server, pg_schema), holds_nothing_removed(strategy, explain))


@pytest.mark.parametrize("explain", [False, True], ids=["window", "explain"])
@pytest.mark.parametrize("strategy", list(HELD))
async def test_redis_held_recall_holds_nothing_of_a_cleared_session(
    redis_server: Server, redis_prefix: str, strategy: str, explain: bool
) -> None:
    await as_two_processes(on_redis(redis_server, redis_prefix), holds_nothing_removed(strategy, explain))


async def test_redis_windows_after_expiry_hold_only_the_new_session(redis_server: Server, redis_prefix: str) -> None:
    async def expires(mine: Any, theirs: Any) -> None:
        context = AgentContext(ContextConfig(mine, [RelevantRecallStrategy(token_budget=400, recall_share=0.5)]))
        await theirs.append_many("agent", transcript("INV-2291"), session_id="s")
        assert "INV-2291" in " ".join(texts(await context.get_prompt_window("s")))

        async def expired() -> bool:
            return await theirs.count_messages("agent", session_id="s") == 0

        await eventually(expired, within=5, what="session expiry")
        await theirs.append_many("agent", transcript("INV-7777"), session_id="s")
        window = " ".join(texts(await context.get_prompt_window("s")))
        assert "INV-2291" not in window
        assert "INV-7777" in window

    await as_two_processes(on_redis(redis_server, redis_prefix, ttl=0.3), expires)


async def keeps_agents_apart(store: Any) -> None:
    alice = AgentContext(
        ContextConfig(store, [RelevantRecallStrategy(token_budget=400, recall_share=0.5)]), agent_id="alice"
    )
    bob = AgentContext(alice.config, agent_id="bob")
    await alice.add_messages("s", transcript("INV-2291"))
    await bob.add_messages("s", transcript("INV-7777"))  # same session id, same message ids
    assert "INV-7777" not in " ".join(texts(await alice.get_prompt_window("s")))
    assert "INV-2291" not in " ".join(texts(await bob.get_prompt_window("s")))
    await store.forget("alice")
    assert texts(await alice.get_prompt_window("s")) == []
    bobs = " ".join(texts(await bob.get_prompt_window("s")))
    assert "INV-7777" in bobs and "INV-2291" not in bobs


async def test_postgres_agents_sharing_session_and_message_ids_stay_apart(
    postgres_server: Server, pg_schema: str
) -> None:
    async for store in closing(on_postgres(postgres_server, pg_schema)()):
        await keeps_agents_apart(store)


async def test_redis_agents_sharing_session_and_message_ids_stay_apart(redis_server: Server, redis_prefix: str) -> None:
    async for store in closing(on_redis(redis_server, redis_prefix)()):
        await keeps_agents_apart(store)


class EchoLLM:
    """Summarises by quoting the transcript, so a summary holds the secrets of the turns it covers."""

    async def complete(self, messages: Sequence[ChatMessage], **_: Any) -> str:
        return "summary: " + messages[-1].text[:2_000]


def long_transcript(secret: str) -> list[ChatMessage]:
    turns = [ChatMessage.user(f"my invoice {secret} shows the wrong amount " + "x" * 300, id="t-0")]
    turns += [ChatMessage.user(f"turn {i} " + "y" * 300, id=f"t-{i}") for i in range(1, 30)]
    return turns


async def summaries_stay_apart(history: Any, summaries: Any) -> None:
    def context(agent: str) -> AgentContext:
        pipeline = [PolicyCompactionStrategy(1_500, CompactionPolicy(keep_recent=4), EchoLLM(), store=summaries)]
        return AgentContext(ContextConfig(history, pipeline), agent_id=agent)

    alice, bob = context("alice"), context("bob")
    await alice.add_messages("s", long_transcript("INV-2291"))
    await bob.add_messages("s", long_transcript("INV-7777"))  # same session id, same message ids
    assert "INV-2291" in " ".join(texts(await alice.get_prompt_window("s")))  # in alice's summary
    bobs = " ".join(texts(await bob.get_prompt_window("s")))
    assert "INV-7777" in bobs and "INV-2291" not in bobs

    await history.forget("alice")
    # the summaries stay behind (the history store alone forgot): the new generation must not read them
    await alice.add_messages("s", long_transcript("INV-0000"))
    alices = " ".join(texts(await alice.get_prompt_window("s")))
    assert "INV-2291" not in alices and "INV-0000" in alices
    bobs = " ".join(texts(await bob.get_prompt_window("s")))
    assert "INV-7777" in bobs and "INV-2291" not in bobs and "INV-0000" not in bobs


async def test_postgres_summaries_of_agents_sharing_ids_stay_apart(postgres_server: Server, pg_schema: str) -> None:
    async for history in closing(PostgresHistoryProvider(postgres_server.address, schema=pg_schema)):
        async for summaries in closing(PostgresSummaryStore(postgres_server.address, schema=pg_schema)):
            await summaries_stay_apart(history, summaries)


async def test_redis_summaries_of_agents_sharing_ids_stay_apart(redis_server: Server, redis_prefix: str) -> None:
    async for history in closing(RedisHistoryProvider(redis_server.address, prefix=redis_prefix)):
        async for summaries in closing(RedisSummaryStore(redis_server.address, prefix=redis_prefix)):
            await summaries_stay_apart(history, summaries)


class PausingEmbeddings(HashingEmbeddingClient):
    """Hashing embeddings; the first query's embedding waits while ``during`` runs (another process's clear)."""

    def __init__(self) -> None:
        super().__init__(dimension=64)
        self.during: Callable[[], Awaitable[None]] | None = None

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        during = self.during
        if during is not None and len(texts) == 1:
            self.during = None
            await during()
        return await super().embed(texts)


async def held_in(vectors: PgVectorStore, secret: str) -> int:
    """How many documents of the session's recall collections hold ``secret``."""
    found = 0
    for name in recall_collections("agent", "s"):
        hits = await vectors.search(tuple([0.125] * 64), collection=name, limit=1_000)
        found += sum(secret in hit.text for hit in hits)
    return found


def indexes_across_a_clear(server: Server, schema: str) -> Callable[[Any, Any], Awaitable[None]]:
    """A recall window that keeps units in pgvector (an ``EmbeddingIndex``) is under way in one process while the
    other clears the session through its context and writes it again: what the late window wrote of the removed
    turns is erased, and no later window of either process shows them."""

    async def body(mine: Any, theirs: Any) -> None:
        async for my_vectors in closing(PgVectorStore(server.address, schema=schema)):
            async for their_vectors in closing(PgVectorStore(server.address, schema=schema)):
                await index_across_a_clear(mine, theirs, my_vectors, their_vectors)

    return body


async def index_across_a_clear(mine: Any, theirs: Any, my_vectors: PgVectorStore, their_vectors: PgVectorStore) -> None:
    embeddings = PausingEmbeddings()
    context = AgentContext(
        ContextConfig(mine, [RelevantRecallStrategy(400, index=EmbeddingIndex(embeddings, my_vectors))])
    )
    index = EmbeddingIndex(HashingEmbeddingClient(dimension=64), their_vectors)
    other = AgentContext(ContextConfig(theirs, [RelevantRecallStrategy(400, index=index)]))
    await other.add_messages("s", transcript("INV-2291"))
    assert "INV-2291" in " ".join(texts(await other.get_prompt_window("s")))  # indexed

    async def elsewhere() -> None:
        await other.clear("s")
        await other.add_messages("s", transcript("INV-7777"))

    embeddings.during = elsewhere
    await context.get_prompt_window("s")  # read before the clear: it may show the old turns
    assert embeddings.during is None
    assert await held_in(their_vectors, "INV-2291") == 0
    for window in (await context.get_prompt_window("s"), await other.get_prompt_window("s")):
        shown = " ".join(texts(window))
        assert "INV-2291" not in shown
        assert "INV-7777" in shown
    assert await held_in(their_vectors, "INV-2291") == 0


async def test_postgres_recall_units_written_across_a_clear_are_erased(postgres_server: Server, pg_schema: str) -> None:
    await as_two_processes(on_postgres(postgres_server, pg_schema), indexes_across_a_clear(postgres_server, pg_schema))


async def test_redis_recall_units_written_across_a_clear_are_erased(
    redis_server: Server, redis_prefix: str, postgres_server: Server, pg_schema: str
) -> None:
    await as_two_processes(on_redis(redis_server, redis_prefix), indexes_across_a_clear(postgres_server, pg_schema))


class ClearingLLM(EchoLLM):
    """Quotes the transcript; its first call waits while ``during`` runs (another process's clear)."""

    def __init__(self) -> None:
        self.during: Callable[[], Awaitable[None]] | None = None

    async def complete(self, messages: Sequence[ChatMessage], **options: Any) -> str:
        during, self.during = self.during, None
        if during is not None:
            await during()
        return await super().complete(messages, **options)


async def summarises_across_a_clear(mine: Any, theirs: Any) -> None:
    """A summary under way in one process while the other clears the session and writes it again: the late
    summary of the removed turns reaches no later window, in either process."""
    llm = ClearingLLM()
    context = AgentContext(SummarizingContext(llm, max_tokens=3_000, history=mine))
    other = AgentContext(SummarizingContext(EchoLLM(), max_tokens=3_000, history=theirs))
    await theirs.append_many("agent", long_transcript("INV-2291"), session_id="s")

    async def elsewhere() -> None:
        await theirs.clear("agent", session_id="s")
        await theirs.append_many("agent", long_transcript("INV-7777"), session_id="s")

    llm.during = elsewhere
    await context.get_prompt_window("s")  # read before the clear: it may show the old turns
    assert llm.during is None
    for window in (await context.get_prompt_window("s"), await other.get_prompt_window("s")):
        shown = " ".join(texts(window))
        assert "INV-2291" not in shown
        assert "INV-7777" in shown


async def test_postgres_summary_under_way_across_a_clear_reaches_no_later_window(
    postgres_server: Server, pg_schema: str
) -> None:
    await as_two_processes(on_postgres(postgres_server, pg_schema), summarises_across_a_clear)


async def test_redis_summary_under_way_across_a_clear_reaches_no_later_window(
    redis_server: Server, redis_prefix: str
) -> None:
    await as_two_processes(on_redis(redis_server, redis_prefix), summarises_across_a_clear)


async def keeps_no_late_window(mine: Any, theirs: Any) -> None:
    """A window under way while the other process clears the session and writes it again, and a later window of
    this process assembles the new one: the late window is not what the new generation keeps."""
    index = PausingBM25()
    context = AgentContext(ContextConfig(mine, [RelevantRecallStrategy(400, prefer="cache", index=index)]))
    await theirs.append_many("agent", transcript("INV-2291"), session_id="s")
    newer: list[ChatMessage] = []

    async def elsewhere() -> None:
        await theirs.clear("agent", session_id="s")
        await theirs.append_many("agent", transcript("INV-7777"), session_id="s")
        newer.extend(await context.get_prompt_window("s"))

    index.during = elsewhere
    await context.get_prompt_window("s")
    assert "INV-7777" in " ".join(texts(newer))
    assert await context.config.pipeline.last_window("agent", "s", history=mine) == newer
    assert "INV-2291" not in " ".join(texts(await context.get_prompt_window("s")))


async def test_postgres_window_under_way_across_a_clear_is_not_kept(postgres_server: Server, pg_schema: str) -> None:
    await as_two_processes(on_postgres(postgres_server, pg_schema), keeps_no_late_window)


async def test_redis_window_under_way_across_a_clear_is_not_kept(redis_server: Server, redis_prefix: str) -> None:
    await as_two_processes(on_redis(redis_server, redis_prefix), keeps_no_late_window)


async def forgets_the_last_window_of_a_clear(mine: Any, theirs: Any) -> None:
    """The other process clears the session (and writes it again): the window this process assembled before is
    no longer its last window, nor counted by ``record_usage``."""
    context = AgentContext(ContextConfig(mine, model="gpt-4o"))
    await theirs.append_many("agent", transcript("INV-2291"), session_id="s")
    window = await context.get_prompt_window("s")
    assert "INV-2291" in " ".join(texts(window))
    await theirs.clear("agent", session_id="s")
    with pytest.raises(InvalidArgument, match="no window was assembled"):
        await context.record_usage("s", 500)
    assert await context.config.pipeline.last_window("agent", "s", history=mine) is None
    await theirs.append_many("agent", transcript("INV-7777"), session_id="s")
    assert await context.config.pipeline.last_window("agent", "s", history=mine) is None
    newer = await context.get_prompt_window("s")
    assert await context.config.pipeline.last_window("agent", "s", history=mine) == newer


async def test_postgres_last_window_of_a_session_cleared_elsewhere_is_not_read(
    postgres_server: Server, pg_schema: str
) -> None:
    await as_two_processes(on_postgres(postgres_server, pg_schema), forgets_the_last_window_of_a_clear)


async def test_redis_last_window_of_a_session_cleared_elsewhere_is_not_read(
    redis_server: Server, redis_prefix: str
) -> None:
    await as_two_processes(on_redis(redis_server, redis_prefix), forgets_the_last_window_of_a_clear)
