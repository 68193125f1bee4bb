"""Relevant recall that asks the store: the store's search gives the window the in-process index gives, and a
window needs only the newest part of the session."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ravi.agents.context import CompactionPipeline, HybridHistoryProvider, InMemoryHistoryProvider, WindowRequest
from ravi.agents.context.compaction.relevant_recall import RelevantRecallStrategy
from ravi.agents.context.recall_index import _unit_of
from ravi.agents.context.units import pair_results
from ravi.conformance.strategy import transcripts
from ravi.kernel.errors import InvalidMessage
from ravi.kernel.messages import ChatMessage, TextBlock, ToolCallBlock

from .doubles import Recording

WORDS = ["cache", "deploy", "staging", "Straße", "αθηνα", "東京", "port", "walrus"]
worded = st.lists(
    st.tuples(st.sampled_from(["user", "assistant", "system", "group"]), st.lists(st.sampled_from(WORDS), max_size=4)),
    max_size=40,
)


def _build(spec: list[tuple[str, list[str]]]) -> list[ChatMessage]:
    out: list[ChatMessage] = []
    for i, (kind, words) in enumerate(spec):
        text = " ".join(words) + f" turn {i}"
        if kind == "group":
            call = ToolCallBlock(id=f"c{i}", name="lookup", arguments={"q": text})
            out += [ChatMessage.assistant(None, tool_calls=[call]), ChatMessage.tool(f"c{i}", text * 3)]
        else:
            out.append(getattr(ChatMessage, kind)(text))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(  # no share for recall, but the newest unit does not fit: what is left of the budget still recalls
    spec=[],
    extra=[
        ChatMessage.user("0"),
        ChatMessage.assistant(None, tool_calls=[ToolCallBlock(id="c", name="tool", arguments={"q": ""})]),
        ChatMessage.tool("c", ""),
    ],
    budget=5,
    share=0.0,
)
@example(  # more units than a default ranking by meaning holds: both rank by meaning to the same depth
    spec=[("user", [])] * 21 + [("user", ["cache", "cache", "cache"]), ("user", ["cache"])],
    extra=[],
    budget=43,
    share=0.3,
)
@given(spec=worded, extra=transcripts, budget=st.integers(0, 400), share=st.sampled_from([0.0, 0.3, 0.5, 1.0]))
def test_the_store_search_gives_the_window_the_in_process_index_gives(
    spec: list[tuple[str, list[str]]], extra: list[ChatMessage], budget: int, share: float
) -> None:
    """On the in-memory store (BM25 over the session, like the in-process index), asking the store changes
    nothing in the window: same units recalled, same order, same budget."""
    history = [*extra, *_build(spec)]

    async def main() -> None:
        store = InMemoryHistoryProvider()
        await store.append_many("a", history, session_id="s")
        searched = CompactionPipeline([RelevantRecallStrategy(budget, recall_share=share, search_limit=10_000)])
        # the same limits: a ranking by meaning of the 16 best units (half the default 32) fuses other scores
        # than one of every unit
        indexed = CompactionPipeline([RelevantRecallStrategy(budget, recall_share=share, search_limit=10_000)])
        got = (await searched.window(WindowRequest("a", "s", history=store))).messages
        want = await indexed.compact(history, indexed.session("a", "s"))
        assert got == want

    asyncio.run(main())


def _record_embeddings(index: Any) -> list[str]:
    """The texts ``index``'s client embeds from now on, in order."""
    asked: list[str] = []
    embed = index.client.embed

    async def counting(texts: list[str]) -> list[list[float]]:
        asked.extend(texts)
        return await embed(texts)  # type: ignore[no-any-return]

    index.client.embed = counting
    return asked


def _long_session(n: int) -> list[ChatMessage]:
    messages = [ChatMessage.system("be brief")]
    for i in range(n):
        if i == 40:
            call = ToolCallBlock(id="deploy", name="lookup", arguments={"host": "staging"})
            messages += [
                ChatMessage.assistant(None, tool_calls=[call]),
                ChatMessage.tool("deploy", "the staging host is zanzibar-7, port 6543"),
            ]
        messages.append(ChatMessage.user(f"question {i} " + "x" * 200))
        messages.append(ChatMessage.assistant(f"answer {i}"))
    return [*messages, ChatMessage.user("which port does zanzibar-7 use?")]


def test_a_fresh_worker_recalls_from_the_store_reading_only_the_window() -> None:
    """10,000 messages: the first window of a fresh pipeline reads the newest part only, and the old tool unit
    that answers the request comes back whole, after the system prompt, before the recent turns."""

    async def main() -> tuple[Recording, list[ChatMessage], list[ChatMessage]]:
        store = Recording()
        messages = _long_session(5_000)
        await store.append_many("a", messages, session_id="s")
        pipeline = CompactionPipeline([RelevantRecallStrategy(2_000)])
        window = (await pipeline.window(WindowRequest("a", "s", history=store))).messages
        return store, messages, window

    store, messages, window = asyncio.run(main())
    assert store.whole == 0 and store.windowed < 200
    recalled = [m for m in window if m.role == "tool" or m.tool_calls]
    assert [m.id for m in recalled] == [m.id for m in messages[81:83]]
    assert window[0] == messages[0] and window[1:3] == messages[81:83]
    assert window[-1] == messages[-1]


def test_an_index_of_its_own_reads_the_session_whole() -> None:
    """``index=`` ranks in the process, which needs every older message: the session is read whole."""

    async def main() -> Recording:
        store = Recording()
        await store.append_many("a", _long_session(100), session_id="s")
        from ravi.agents.context.recall_index import BM25Index

        pipeline = CompactionPipeline([RelevantRecallStrategy(500, index=BM25Index())])
        await pipeline.window(WindowRequest("a", "s", history=store))
        return store

    store = asyncio.run(main())
    assert store.windowed == 0 and store.whole > 0


def test_a_provider_that_cannot_search_is_read_whole() -> None:
    """A provider that reads windows but cannot search: recall ranks in the process, on the whole session."""

    class WindowsOnly(Recording):
        search_units = None  # type: ignore[assignment]

    async def main() -> tuple[Recording, list[ChatMessage]]:
        store = WindowsOnly()
        messages = _long_session(100)
        await store.append_many("a", messages, session_id="s")
        pipeline = CompactionPipeline([RelevantRecallStrategy(500)])
        return store, (await pipeline.window(WindowRequest("a", "s", history=store))).messages

    store, window = asyncio.run(main())
    assert store.windowed == 0 and store.whole > 0
    assert any(m.role == "tool" for m in window)


def test_the_hybrid_provider_searches_the_tier_that_serves_the_session() -> None:
    async def main() -> list[ChatMessage]:
        hot, cold = InMemoryHistoryProvider(), InMemoryHistoryProvider()
        history = HybridHistoryProvider(hot, cold)
        await cold.append_many("a", _long_session(100), session_id="s")  # the hot tier lost the session
        pipeline = CompactionPipeline([RelevantRecallStrategy(500)])
        return (await pipeline.window(WindowRequest("a", "s", history=history))).messages

    window = asyncio.run(main())
    assert [m.role for m in window[:3]] == ["system", "assistant", "tool"]


def _embedding_index(store: object | None = None) -> object:
    from ravi.agents.context.recall_index import EmbeddingIndex
    from ravi.kernel.embeddings import HashingEmbeddingClient

    return EmbeddingIndex(HashingEmbeddingClient(dimension=64), store, min_score=0.05)  # type: ignore[arg-type]


def tool_call(call_id: str) -> ToolCallBlock:
    return ToolCallBlock(id=call_id, name="tool", arguments={"q": ""})


def _late_result() -> list[ChatMessage]:
    """A system message that stands alone until the tool result after it joins it to the tool group before it."""
    call = ChatMessage(id="a2", role="assistant", content=(tool_call("c2"), tool_call("c3")))
    return [
        ChatMessage(id="u1", role="user", content=(TextBlock(text="0"),)),
        ChatMessage(id="a1", role="assistant", content=(tool_call("c1"),)),
        ChatMessage.tool("c1", "", id="t1"),
        call,
        ChatMessage.tool("c2", "", id="t2"),
        ChatMessage(id="s1", role="system", content=(TextBlock(text="0"),)),
        ChatMessage.tool("c3", "", id="t3"),
    ]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spec=worded,
    extra=transcripts,
    budget=st.integers(0, 400),
    share=st.sampled_from([0.0, 0.5, 1.0]),
    step=st.integers(1, 12),
)
@example(spec=[], extra=_late_result(), budget=23, share=0.5, step=1)
def test_an_embedding_index_in_a_shared_store_gives_the_window_of_the_in_process_one(
    spec: list[tuple[str, list[str]]], extra: list[ChatMessage], budget: int, share: float, step: int
) -> None:
    """An ``EmbeddingIndex`` on a shared vector store keeps each session there, extended as it grows (appended
    in chunks here), and reads only the newest part: every window equals the one the same index gives ranking
    the whole history in the process."""
    from ravi.agents.storage.vector import InMemoryVectorStore

    history = [*extra, *_build(spec)]

    async def main() -> None:
        store = Recording()
        vectors = InMemoryVectorStore()
        stored = CompactionPipeline(
            [RelevantRecallStrategy(budget, recall_share=share, index=_embedding_index(vectors))]
        )  # type: ignore[arg-type]
        in_process = RelevantRecallStrategy(budget, recall_share=share, index=_embedding_index())  # type: ignore[arg-type]
        so_far: list[ChatMessage] = []
        for i in range(0, max(len(history), 1), step):
            chunk = history[i : i + step]
            await store.append_many("a", chunk, session_id="s")
            so_far += chunk
            got = (await stored.window(WindowRequest("a", "s", history=store))).messages
            # as the engine sends it: a call whose results the chunk has not reached yet is taken out
            assert got == pair_results(await in_process.compact(so_far))

    asyncio.run(main())


def test_a_fresh_worker_finds_the_embedding_index_in_the_shared_store() -> None:
    """The first window indexes the session (reading it whole, once); a new worker with the same vector store
    then reads only the window, embeds only the new messages, and recalls the old tool unit."""
    from ravi.agents.storage.vector import InMemoryVectorStore

    async def main() -> None:
        store, vectors = Recording(), InMemoryVectorStore()
        messages = _long_session(2_000)
        await store.append_many("a", messages[:-1], session_id="s")
        first = CompactionPipeline([RelevantRecallStrategy(2_000, index=_embedding_index(vectors))])  # type: ignore[arg-type]
        await first.window(WindowRequest("a", "s", history=store))
        assert store.windowed >= len(messages) - 1  # never indexed: read back to the start

        await store.append_many("a", messages[-1:], session_id="s")
        store.whole = store.windowed = 0
        index = _embedding_index(vectors)
        embedded = _record_embeddings(index)
        worker = CompactionPipeline([RelevantRecallStrategy(2_000, index=index)])  # type: ignore[arg-type]
        window = (await worker.window(WindowRequest("a", "s", history=store))).messages
        assert store.whole == 0 and store.windowed < 200
        assert embedded == [messages[-1].text, messages[-1].text]  # the request, and the one new message
        assert window[0] == messages[0] and window[1:3] == messages[81:83] and window[-1] == messages[-1]

    asyncio.run(main())


def test_an_embedding_index_sees_a_cleared_session_refilled() -> None:
    """The index remembers the last message it took and where: a session cleared and written again is indexed
    afresh, and nothing of its old life is recalled."""
    from ravi.agents.storage.vector import InMemoryVectorStore

    async def main() -> None:
        store, vectors = Recording(), InMemoryVectorStore()
        pipeline = CompactionPipeline([RelevantRecallStrategy(2_000, index=_embedding_index(vectors))])  # type: ignore[arg-type]
        await store.append_many("a", _long_session(300), session_id="s")
        await pipeline.window(WindowRequest("a", "s", history=store))
        await store.clear("a", session_id="s")
        fresh = [ChatMessage.user(f"note {i} " + "y" * 200) for i in range(300)]
        await store.append_many("a", [*fresh, ChatMessage.user("which port does zanzibar-7 use?")], session_id="s")
        window = (await pipeline.window(WindowRequest("a", "s", history=store))).messages
        assert not any(m.role == "tool" for m in window)
        want = await RelevantRecallStrategy(2_000, index=_embedding_index()).compact(  # type: ignore[arg-type]
            await store.get_messages("a", session_id="s")
        )
        assert window == want

    asyncio.run(main())


def test_a_read_too_short_for_the_embedding_index_costs_no_embedding() -> None:
    """A session never indexed is read back to its start, a longer read at a time: the request is embedded
    once, on the read that suffices, not once per read."""
    from ravi.agents.storage.vector import InMemoryVectorStore
    from ravi.kernel.search import message_text

    async def main() -> None:
        store = Recording()
        messages = _long_session(2_000)
        await store.append_many("a", messages, session_id="s")
        index = _embedding_index(InMemoryVectorStore())
        asked = _record_embeddings(index)
        pipeline = CompactionPipeline([RelevantRecallStrategy(2_000, index=index)])  # type: ignore[arg-type]
        await pipeline.window(WindowRequest("a", "s", history=store))
        assert asked.count(messages[-1].text) == 2  # the request, and the message itself
        assert len(asked) == sum(1 for m in messages if message_text(m).strip()) + 1  # each message once

    asyncio.run(main())


def test_a_progress_record_the_index_did_not_write_starts_it_afresh() -> None:
    """A ``ravi:progress`` document with other fields (written by hand, or by another tool) is not trusted and
    raises nothing: the session is indexed again from its start."""
    from ravi.agents.storage.vector import InMemoryVectorStore
    from ravi.kernel.storage import Document

    async def main() -> None:
        store, vectors = Recording(), InMemoryVectorStore()
        messages = _long_session(300)
        await store.append_many("a", messages, session_id="s")
        index = _embedding_index(vectors)
        pipeline = CompactionPipeline([RelevantRecallStrategy(2_000, index=index)])  # type: ignore[arg-type]
        want = (await pipeline.window(WindowRequest("a", "s", history=store))).messages
        [units] = [c for c in await vectors.list_collections() if c.endswith("-units")]
        await vectors.upsert(
            [Document(id="ravi:progress", embedding=(1.0,) * 64, metadata={"units": "x"})], collection=units
        )
        again = CompactionPipeline([RelevantRecallStrategy(2_000, index=_embedding_index(vectors))])  # type: ignore[arg-type]
        assert (await again.window(WindowRequest("a", "s", history=store))).messages == want

    asyncio.run(main())


def test_a_unit_read_back_from_a_vector_store_is_checked_like_a_stored_message() -> None:
    """The embedding index keeps each unit as JSON in the vector store: reading one back gives the messages as
    stored, and text that is not a unit of valid messages raises ``InvalidMessage``, not a parser's error."""
    call = ChatMessage.assistant(None, tool_calls=[ToolCallBlock(id="c", name="f", arguments={"q": "straße"})])
    unit = (call, ChatMessage.tool("c", "ok"))
    assert _unit_of("[" + ",".join(m.model_dump_json() for m in unit) + "]") == unit
    deep = "[" * 100_000 + "]" * 100_000
    for bad in ("not json", '{"role": "user"}', '[{"role": "user", "content": [{"type": "text"}]}]', deep):
        with pytest.raises(InvalidMessage):
            _unit_of(bad)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spec=worded,
    extra=transcripts,
    budget=st.integers(0, 400),
    prefer=st.sampled_from(["relevance", "cache"]),
    step=st.integers(1, 12),
)
def test_recall_from_the_store_as_the_session_grows_gives_the_windows_of_the_whole_history(
    spec: list[tuple[str, list[str]]], extra: list[ChatMessage], budget: int, prefer: str, step: int
) -> None:
    """Both preferences, with their defaults (the share that follows the request, words and meaning fused,
    neighbours, labels), on a session appended in chunks: each window read from the newest part of the store
    (searched in the store) equals the window the same strategy makes of the whole history in the process, with
    a session of its own."""
    from ravi.kernel.agent import SessionContext

    history = [*extra, *_build(spec)]

    async def main() -> None:
        store = Recording()
        stored = CompactionPipeline([RelevantRecallStrategy(budget, prefer=prefer)])  # type: ignore[arg-type]
        in_process = RelevantRecallStrategy(budget, prefer=prefer)  # type: ignore[arg-type]
        session = SessionContext("a", "s")
        so_far: list[ChatMessage] = []
        for i in range(0, max(len(history), 1), step):
            chunk = history[i : i + step]
            await store.append_many("a", chunk, session_id="s")
            so_far += chunk
            got = (await stored.window(WindowRequest("a", "s", history=store))).messages
            session.read_from(so_far)
            assert got == pair_results(await in_process.compact(so_far, session))  # as the engine sends it

    asyncio.run(main())


class _WrittenAfterEachRead(InMemoryHistoryProvider):
    """The in-memory store, with another writer appending ``pending`` to the session right after a read of its
    newest part returns (before the window's search)."""

    def __init__(self) -> None:
        super().__init__()
        self.pending: list[ChatMessage] = []

    async def read_window(self, agent_id: str, *, session_id: str, tokens: int) -> Any:
        view = await super().read_window(agent_id, session_id=session_id, tokens=tokens)
        pending, self.pending = self.pending, []
        await self.append_many(agent_id, pending, session_id=session_id)
        return view


@pytest.mark.parametrize("prefer", ["relevance", "cache"])
def test_a_window_recalls_nothing_appended_after_its_read(prefer: str) -> None:
    """When not even the request fits, the window is recalled units alone; the search is bounded by the end of the
    part read, so a turn another writer appended meanwhile is not recalled (it would be newer than the request),
    and the next window, which holds it as a newest turn, holds it once."""
    history = [ChatMessage.user(f"deploy cache {i}", id=f"t{i}") for i in range(12)]
    history.append(ChatMessage.user("which deploy cache did we pick for the staging walrus port back then?", id="q"))

    async def main() -> None:
        store = _WrittenAfterEachRead()
        await store.append_many("a", history, session_id="s")
        pipeline = CompactionPipeline([RelevantRecallStrategy(14, meaning=None, prefer=prefer)])  # type: ignore[arg-type]
        request = WindowRequest("a", "s", history=store)
        store.pending = [ChatMessage.user("deploy cache 99", id="late")]
        first = [m.id for m in (await pipeline.window(request)).messages]
        assert first and "late" not in first
        second = [m.id for m in (await pipeline.window(request)).messages]
        assert len(second) == len(set(second)), second

    asyncio.run(main())
