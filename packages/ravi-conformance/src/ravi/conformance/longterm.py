"""``LongTermMemoryContract``: what every long-term memory must do."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from ravi.conformance._base import ContractBase, call_or_skip_unsupported, eventually, skip_without, unique
from ravi.kernel.errors import InvalidArgument
from ravi.kernel.storage import LongTermMemory

FACTS = [
    "The customer's invoice number is INV-2291 and it was paid in March.",
    "Deploys to production happen on Tuesdays after the release review.",
    "The staging database lives on host db-staging-3 in eu-west.",
    "Alice prefers answers in bullet points, short and direct.",
]


class LongTermMemoryContract(ContractBase):
    """Subclass and override the ``memory_store`` fixture to yield an empty ``LongTermMemory``."""

    contract_name = "LongTermMemory"
    pytestmark = pytest.mark.asyncio

    @pytest.fixture
    def memory_store(self) -> LongTermMemory:
        """Override: an empty backend, fresh for each test."""
        raise NotImplementedError("override the 'memory_store' fixture to build an empty backend")

    async def test_is_a_long_term_memory(self, memory_store: LongTermMemory) -> None:
        assert isinstance(memory_store, LongTermMemory)

    async def test_canary_fixture_gives_an_empty_backend_first(self, memory_store: LongTermMemory) -> None:
        assert await memory_store.search("canary", "anything", limit=10) == []
        await memory_store.save("canary", "left behind")

    async def test_canary_fixture_gives_an_empty_backend_second(self, memory_store: LongTermMemory) -> None:
        assert await memory_store.search("canary", "anything", limit=10) == [], "state leaked between tests"
        await memory_store.save("canary", "left behind")

    async def test_save_then_get(self, memory_store: LongTermMemory) -> None:
        a = unique("agent")
        memory_id = await memory_store.save(a, "remember this 漢字", namespace="notes", metadata={"source": "chat"})
        got = await memory_store.get(a, memory_id, namespace="notes")
        assert got is not None
        assert (got.id, got.content, got.namespace, got.agent_id) == (memory_id, "remember this 漢字", "notes", a)
        assert got.metadata == {"source": "chat"}

    async def test_ids_are_unique(self, memory_store: LongTermMemory) -> None:
        a = unique("agent")
        ids = [await memory_store.save(a, "same text") for _ in range(5)]
        assert len(set(ids)) == 5

    async def test_search_ranks_the_most_relevant_first(self, memory_store: LongTermMemory) -> None:
        a = unique("agent")
        ids = [await memory_store.save(a, fact) for fact in FACTS]
        hits = await memory_store.search(a, "which host is the staging database on?", limit=4)
        assert hits[0].id == ids[2]
        scores = [h.score for h in hits if h.score is not None]
        assert len(scores) == len(hits), "search results must carry their score"
        assert scores == sorted(scores, reverse=True), "scores must decrease: higher is closer"

    async def test_an_exact_match_scores_higher_than_an_unrelated_memory(self, memory_store: LongTermMemory) -> None:
        a = unique("agent")
        await memory_store.save(a, FACTS[0])
        await memory_store.save(a, FACTS[1])
        hits = await memory_store.search(a, FACTS[1], limit=2)
        assert hits[0].content == FACTS[1]
        assert hits[0].score is not None and hits[1].score is not None and hits[0].score > hits[1].score

    async def test_limit_is_respected(self, memory_store: LongTermMemory) -> None:
        a = unique("agent")
        for fact in FACTS:
            await memory_store.save(a, fact)
        assert len(await memory_store.search(a, "database", limit=2)) == 2
        assert await memory_store.search(a, "database", limit=0) == []

    async def test_namespaces_are_isolated(self, memory_store: LongTermMemory) -> None:
        a = unique("agent")
        memory_id = await memory_store.save(a, "in work", namespace="work")
        await memory_store.save(a, "in home", namespace="home")
        assert [m.content for m in await memory_store.search(a, "in", namespace="work", limit=5)] == ["in work"]
        assert await memory_store.get(a, memory_id, namespace="home") is None

    async def test_agents_are_isolated(self, memory_store: LongTermMemory) -> None:
        a, b = unique("agent"), unique("agent")
        memory_id = await memory_store.save(a, "private to a")
        assert await memory_store.search(b, "private", limit=5) == []
        assert await memory_store.get(b, memory_id) is None

    async def test_delete_is_idempotent(self, memory_store: LongTermMemory) -> None:
        a = unique("agent")
        memory_id = await memory_store.save(a, "short-lived")
        assert await memory_store.delete(a, memory_id) is True
        assert await memory_store.delete(a, memory_id) is False
        assert await memory_store.get(a, memory_id) is None

    async def test_clear_one_namespace_or_all(self, memory_store: LongTermMemory) -> None:
        a, b = unique("agent"), unique("agent")
        for ns in ("x", "x", "y"):
            await memory_store.save(a, f"fact in {ns}", namespace=ns)
        await memory_store.save(b, "other agent", namespace="x")
        assert await memory_store.clear(a, namespace="x") == 2
        assert len(await memory_store.search(a, "fact", namespace="y", limit=5)) == 1
        assert await memory_store.clear(a) == 1
        assert len(await memory_store.search(b, "other", namespace="x", limit=5)) == 1

    async def test_search_of_an_empty_namespace_is_empty(self, memory_store: LongTermMemory) -> None:
        assert await memory_store.search(unique("agent"), "anything", namespace=unique("ns"), limit=3) == []

    async def test_expired_memories_are_never_returned(self, memory_store: LongTermMemory) -> None:
        skip_without(self.capabilities, "ttl", reason="memories saved with a ttl")
        a = unique("agent")
        keep = await memory_store.save(a, "durable fact about deployment")
        gone = await call_or_skip_unsupported(memory_store.save(a, "fleeting fact about deployment", ttl=0.3), "ttl")
        assert await memory_store.get(a, gone) is not None

        async def expired() -> bool:
            return await memory_store.get(a, gone) is None

        await eventually(expired, within=0.3 + self.capabilities.ttl_resolution + 5, what="ttl expiry")
        assert [m.id for m in await memory_store.search(a, "fact about deployment", limit=5)] == [keep]

    async def test_bad_input_raises_typed_errors(self, memory_store: LongTermMemory) -> None:
        a = unique("agent")
        kept = await memory_store.save(a, "kept")
        with pytest.raises(InvalidArgument):
            await memory_store.save(a, "negative ttl", ttl=-1)
        with pytest.raises(InvalidArgument):
            await memory_store.save("", "no agent")
        with pytest.raises(InvalidArgument):
            await memory_store.search(a, "q", limit=-1)
        assert await memory_store.get(a, kept) is not None

    async def test_values_no_store_can_keep_are_refused_and_nothing_is_stored(
        self, memory_store: LongTermMemory
    ) -> None:
        """TTLs no server can hold (infinite, 1e17 s), NaN in metadata and lone surrogates are refused with
        InvalidArgument before anything is written."""
        a = unique("agent")
        bad_calls: list[Callable[[], Awaitable[Any]]] = [
            lambda: memory_store.save(a, "forever", ttl=float("inf")),
            lambda: memory_store.save(a, "too long", ttl=1e17),
            lambda: memory_store.save(a, "nan", metadata={"n": float("nan")}),
            lambda: memory_store.save(a, "lone \ud800 surrogate"),
            lambda: memory_store.save(a, "bad key", metadata={"k\udfff": 1}),
        ]
        for call in bad_calls:
            with pytest.raises(InvalidArgument):
                await call()
        assert await memory_store.search(a, "forever too long nan lone bad key", limit=10) == []

    async def test_ids_that_are_not_text_are_refused(self, memory_store: LongTermMemory) -> None:
        """A memory id with a lone surrogate, or not a string, is InvalidArgument on every call, not a crash."""
        a = unique("agent")
        for bad in ("m\ud800", 42):
            with pytest.raises(InvalidArgument):
                await memory_store.get(a, bad)  # type: ignore[arg-type]
            with pytest.raises(InvalidArgument):
                await memory_store.delete(a, bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            await memory_store.search(a, "q", namespace="n\udfff")

    async def test_unicode_and_long_content(self, memory_store: LongTermMemory) -> None:
        a = unique("agent")
        text = "Grüße aus 東京 🚀 " * 2_000
        memory_id = await memory_store.save(a, text, namespace="ünï")
        got = await memory_store.get(a, memory_id, namespace="ünï")
        assert got is not None and got.content == text
